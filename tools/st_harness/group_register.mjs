// Like register.mjs, but SillyTavern's group-chats.js runs as it is (for group_driver.mjs).
// Usage: ST_HARNESS_ROOT=<st-root> node --import ./group_register.mjs group_driver.mjs < cases.json
import { register } from 'node:module';
import './globals.mjs';

register('./loader.mjs', import.meta.url, {
    data: { stRoot: process.env.ST_HARNESS_ROOT, extraReal: ['scripts/group-chats.js'] },
});
