// Runs SillyTavern's Chat Completion assembly (openai.js prepareOpenAIMessages and everything
// it calls: PromptManager, ChatCompletion, squashing, example parsing, macros) for each case
// read from stdin, and prints the message arrays as JSON. The checkout is named by
// ST_HARNESS_ROOT; register.mjs installs the module hooks that stand in for the app shell.
//
// What this file does itself is what SillyTavern's Generate() does before it calls the
// assembly: pick the preset's settings, fill the chat and the card fields, split the example
// dialogue into <START> blocks, set the character's depth prompt and the continue text.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import path from 'node:path';

// SillyTavern logs to the console; stdout carries only the result.
console.log = console.info = console.debug = console.table = () => {};
const root = process.env.ST_HARNESS_ROOT;
const st = (rel) => pathToFileURL(path.join(root, 'public', rel)).href;

const openai = await import(st('scripts/openai.js'));
// The stand-ins themselves (the generated modules re-export these same instances).
const shell = await import('./shims/script.mjs');
const { power_user } = await import('./shims/scripts/power-user.mjs');
const { extension_settings } = await import('./shims/scripts/extensions.mjs');
const { state } = await import('./shims/state.mjs');

const { resetCase, setDepthPrompt, assemble } = await import('./common.mjs');

async function run(kase) {
    const settings = resetCase(openai, kase, { shell, power_user, extension_settings, state });
    const card = kase.card;
    shell.setNames(kase.user.name, card.name);
    state.card = card;
    setDepthPrompt(state, shell, card.depth_prompt);

    openai.__harnessResetPromptManager();
    openai.setupChatCompletionPromptManager(settings);

    const chat = kase.chat.map((m) => ({ name: m.is_user ? kase.user.name : card.name, is_user: m.is_user, mes: m.mes }));
    if (chat.length) chat[0].mes = shell.substituteParams(chat[0].mes);
    let cyclePrompt = '';
    if (kase.type === 'continue' && chat.length) {
        cyclePrompt = chat[chat.length - 1].mes;
        if (!cyclePrompt.endsWith(' ')) cyclePrompt += settings.continue_postfix;
    }
    return assemble(openai, shell, {
        name2: card.name,
        chat,
        lore: kase.lore,
        type: kase.type === 'normal' ? undefined : kase.type,
        cyclePrompt,
        extensionPrompts: state.extensionPrompts,
    });
}

const cases = JSON.parse(readFileSync(0, 'utf8'));
const out = {};
for (const kase of cases) {
    out[kase.id] = await run(kase);
}
process.stdout.write(JSON.stringify(out));
