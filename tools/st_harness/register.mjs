// Installs the module hooks (loader.mjs) before the driver imports SillyTavern's modules.
// Usage: node --import ./register.mjs driver.mjs <st-root> < cases.json
import { register } from 'node:module';
import './globals.mjs';

register('./loader.mjs', import.meta.url, { data: { stRoot: process.env.ST_HARNESS_ROOT } });
