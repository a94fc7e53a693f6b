// Runs SillyTavern's own group reply loop (group-chats.js generateGroupWrapper) for each case
// and prints who it generated for, in order: {caseId: {speakers: [name]} | {error}}.
// A case: {id, group: <ST group file>, characters: [{name, avatar, talkativeness}], chat:
// [<ST message>], input: <the text in the send box>, random: [floats Math.random returns]}.
import { readFileSync } from 'node:fs';
import { inert } from './shims/auto.mjs';
import { state } from './shims/state.mjs';

// Browser globals the group UI code reaches on the way (inert, like globals.mjs's).
for (const name of ['CSS']) globalThis[name] = inert(name);

const cases = JSON.parse(readFileSync(0, 'utf8'));
const groupChats = await import('st:scripts/group-chats.js');
const { characters, chat } = await import(new URL('./shims/script.mjs', import.meta.url).href);

let current = null;
globalThis.fetch = async (url) => {
    const body = String(url).includes('/api/groups/all') ? [current.group] : current.chat;
    return { ok: true, status: 200, json: async () => structuredClone(body) };
};
const realRandom = Math.random;
const out = {};
for (const item of cases) {
    current = item;
    characters.splice(0, characters.length, ...item.characters);
    chat.length = 0;
    state.generated = [];
    const box = { val: (v) => (v === undefined ? item.input : [{ dispatchEvent() {} }]) };
    globalThis.$ = (sel) => (sel === '#send_textarea' ? box : inert('$'));
    globalThis.jQuery = globalThis.$;
    try {
        await groupChats.getGroups();
        await groupChats.openGroupById(item.group.id);
        const draws = [...item.random];
        Math.random = () => {
            if (!draws.length) throw new Error('ran out of scripted random numbers');
            return draws.shift();
        };
        await groupChats.generateGroupWrapper(false);
        Math.random = realRandom;
        out[item.id] = { speakers: state.generated.map((i) => characters[i].name), unused: draws.length };
    } catch (err) {
        Math.random = realRandom;
        out[item.id] = { error: String(err && err.stack ? err.stack : err) };
    }
}
// group-chats.js starts its auto-mode timer at load: leave once the answer is written.
process.stdout.write(JSON.stringify(out), () => process.exit(0));
