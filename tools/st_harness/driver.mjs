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

// Preset fields the Chat Completion preset loader copies into the live settings (same names).
const PRESET_FIELDS = [
    'prompts', 'prompt_order', 'openai_max_context', 'openai_max_tokens', 'send_if_empty',
    'impersonation_prompt', 'new_chat_prompt', 'new_group_chat_prompt', 'new_example_chat_prompt',
    'continue_nudge_prompt', 'wi_format', 'scenario_format', 'personality_format',
    'group_nudge_prompt', 'squash_system_messages', 'names_behavior', 'continue_prefill',
    'continue_postfix', 'assistant_prefill', 'assistant_impersonation', 'wrap_in_quotes',
];
const ROLES = { system: 0, user: 1, assistant: 2 };

function exampleBlocks(text) {
    // Generate()'s split of mes_example: blocks start at <START> (one is assumed at the top).
    if (!text || text === '<START>') return [];
    if (!text.startsWith('<START>')) text = '<START>\n' + text.trim();
    return text.split(/<START>/gi).slice(1).map((block) => `<START>\n${block.trim()}\n`);
}

async function run(kase) {
    const settings = openai.oai_settings;
    const defaults = structuredClone(openai.default_settings);
    for (const key of Object.keys(settings)) delete settings[key];
    Object.assign(settings, defaults);
    const preset = structuredClone(kase.preset);
    for (const key of PRESET_FIELDS) {
        if (preset[key] !== undefined) settings[key] = preset[key];
    }
    Object.assign(settings, kase.settings ?? {});

    const card = kase.card;
    shell.setNames(kase.user.name, card.name);
    state.card = card;
    state.persona = kase.user.persona ?? '';
    power_user.persona_description = kase.user.persona ?? '';
    power_user.persona_description_position = 0;
    for (const key of Object.keys(shell.chat_metadata)) delete shell.chat_metadata[key];
    extension_settings.variables.global = {};
    for (const key of Object.keys(state.extensionPrompts)) delete state.extensionPrompts[key];
    const depth = card.depth_prompt;
    if (depth && depth.prompt) {
        state.extensionPrompts.DEPTH_PROMPT = {
            value: shell.baseChatReplace(depth.prompt.trim()),
            position: 1,
            depth: depth.depth ?? 4,
            role: ROLES[depth.role ?? 'system'],
        };
    }

    openai.__harnessResetPromptManager();
    openai.setupChatCompletionPromptManager(settings);

    const fields = shell.getCharacterCardFields();
    const chat = kase.chat.map((m) => ({ name: m.is_user ? kase.user.name : card.name, is_user: m.is_user, mes: m.mes }));
    if (chat.length) chat[0].mes = shell.substituteParams(chat[0].mes);
    let cyclePrompt = '';
    if (kase.type === 'continue' && chat.length) {
        cyclePrompt = chat[chat.length - 1].mes;
        if (!cyclePrompt.endsWith(' ')) cyclePrompt += settings.continue_postfix;
    }
    const messages = openai.setOpenAIMessages(chat);
    const examples = openai.setOpenAIMessageExamples(exampleBlocks(fields.mesExamples));
    const [prompt] = await openai.prepareOpenAIMessages({
        name2: card.name,
        charDescription: fields.description,
        charPersonality: fields.personality,
        Scenario: fields.scenario,
        worldInfoBefore: kase.lore?.before ?? '',
        worldInfoAfter: kase.lore?.after ?? '',
        extensionPrompts: state.extensionPrompts,
        bias: '',
        type: kase.type === 'normal' ? undefined : kase.type,
        quietPrompt: '',
        quietImage: null,
        cyclePrompt,
        systemPromptOverride: fields.system,
        jailbreakPromptOverride: fields.jailbreak,
        personaDescription: fields.persona,
        messages,
        messageExamples: examples,
    }, false);
    return prompt.map((m) => ({ role: m.role, content: m.content, ...(m.name ? { name: m.name } : {}) }));
}

const cases = JSON.parse(readFileSync(0, 'utf8'));
const out = {};
for (const kase of cases) {
    out[kase.id] = await run(kase);
}
process.stdout.write(JSON.stringify(out));
