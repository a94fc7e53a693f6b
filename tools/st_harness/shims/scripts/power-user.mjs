// Stand-in for power-user.js: the user settings the assembly reads.
export const persona_description_positions = { IN_PROMPT: 0, AFTER_CHAR: 1, TOP_AN: 2, BOTTOM_AN: 3, AT_DEPTH: 4, NONE: 9 };
export const power_user = {
    persona_description: '',
    persona_description_position: 0,
    pin_examples: false,
    strip_examples: false,
    console_log_prompts: false,
    collapse_newlines: false,
    prefer_character_prompt: true,
    prefer_character_jailbreak: true,
    instruct: { enabled: false, wrap: true },
    context: { example_separator: '' },
};
export function collapseNewlines(text) { return text; }
export function getCustomStoppingStrings() { return []; }
export function forceCharacterEditorTokenize() {}
