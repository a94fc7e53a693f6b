// The harness's per-case state, shared by the shims (the stand-ins for SillyTavern's app shell).
export const state = {
    userName: 'User',
    charName: 'Character',
    card: null, // { description, personality, scenario, mes_example, system_prompt, post_history_instructions }
    persona: '',
    // extension prompts by key: { value, position, depth, role }
    extensionPrompts: {},
    // group_driver.mjs: the character index Generate() was last set to, and every call's.
    groupChid: undefined,
    generated: [],
    // group_assembly_driver.mjs: in a group chat, group-chats.js's joined card fields for the
    // current speaker (null in swap mode) and {{group}}'s member list; null outside a group.
    groupCharacterCards: null,
    groupMemberNames: null,
};
