// What driver.mjs (one character) and group_assembly_driver.mjs (a group turn) both do before
// SillyTavern's assembly runs: load a preset into the live settings, reset the per-case shell
// state, split the example dialogue, and call prepareOpenAIMessages as Generate() calls it.

// Preset fields the Chat Completion preset loader copies into the live settings (same names).
export const PRESET_FIELDS = [
    'prompts', 'prompt_order', 'openai_max_context', 'openai_max_tokens', 'send_if_empty',
    'impersonation_prompt', 'new_chat_prompt', 'new_group_chat_prompt', 'new_example_chat_prompt',
    'continue_nudge_prompt', 'wi_format', 'scenario_format', 'personality_format',
    'group_nudge_prompt', 'squash_system_messages', 'names_behavior', 'continue_prefill',
    'continue_postfix', 'assistant_prefill', 'assistant_impersonation', 'wrap_in_quotes',
];
export const ROLES = { system: 0, user: 1, assistant: 2 };

/** Generate()'s split of mes_example: blocks start at <START> (one is assumed at the top). */
export function exampleBlocks(text) {
    if (!text || text === '<START>') return [];
    if (!text.startsWith('<START>')) text = '<START>\n' + text.trim();
    return text.split(/<START>/gi).slice(1).map((block) => `<START>\n${block.trim()}\n`);
}

/** The case's preset (and overrides) as the live settings; the shell's per-case state empty. */
export function resetCase(openai, kase, { shell, power_user, extension_settings, state }) {
    const settings = openai.oai_settings;
    const defaults = structuredClone(openai.default_settings);
    for (const key of Object.keys(settings)) delete settings[key];
    Object.assign(settings, defaults);
    const preset = structuredClone(kase.preset);
    for (const key of PRESET_FIELDS) {
        if (preset[key] !== undefined) settings[key] = preset[key];
    }
    Object.assign(settings, kase.settings ?? {});
    state.persona = kase.user.persona ?? '';
    power_user.persona_description = kase.user.persona ?? '';
    power_user.persona_description_position = 0;
    for (const key of Object.keys(shell.chat_metadata)) delete shell.chat_metadata[key];
    extension_settings.variables.global = {};
    for (const key of Object.keys(state.extensionPrompts)) delete state.extensionPrompts[key];
    return settings;
}

/** The depth prompt of a card as Generate() sets it for one character (DEPTH_PROMPT). */
export function setDepthPrompt(state, shell, depth) {
    if (depth && depth.prompt) {
        state.extensionPrompts.DEPTH_PROMPT = {
            value: shell.baseChatReplace(depth.prompt.trim()),
            position: 1,
            depth: depth.depth ?? 4,
            role: ROLES[depth.role ?? 'system'],
        };
    }
}

/** prepareOpenAIMessages with the arguments Generate() passes, for `chat` (ST messages). */
export async function assemble(openai, shell, { name2, chat, lore, type, cyclePrompt, extensionPrompts }) {
    const fields = shell.getCharacterCardFields();
    const messages = openai.setOpenAIMessages(chat);
    const examples = openai.setOpenAIMessageExamples(exampleBlocks(fields.mesExamples));
    const [prompt] = await openai.prepareOpenAIMessages({
        name2,
        charDescription: fields.description,
        charPersonality: fields.personality,
        Scenario: fields.scenario,
        worldInfoBefore: lore?.before ?? '',
        worldInfoAfter: lore?.after ?? '',
        extensionPrompts,
        bias: '',
        type,
        quietPrompt: '',
        quietImage: null,
        cyclePrompt: cyclePrompt ?? '',
        systemPromptOverride: fields.system,
        jailbreakPromptOverride: fields.jailbreak,
        personaDescription: fields.persona,
        messages,
        messageExamples: examples,
    }, false);
    return prompt.map((m) => ({ role: m.role, content: m.content, ...(m.name ? { name: m.name } : {}) }));
}
