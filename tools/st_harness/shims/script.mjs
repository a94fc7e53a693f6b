// Stand-in for SillyTavern's public/script.js (the app shell: chat state, names, the macro
// environment and extension prompts). Written for the harness from the behaviour the reference
// describes; the macro engine itself is SillyTavern's macros.js.
import { evaluateMacros } from 'st:scripts/macros.js';
import { state } from './state.mjs';
import { inert } from './auto.mjs';

export let name1 = 'User';
export let name2 = 'Character';
export let this_chid = 0;
export const characters = [];
export const chat = [];
export const chat_metadata = {};
// Not 'openai': PromptManager.render() returns at once (there is no DOM to draw).
export let main_api = 'harness';
export const is_send_press = false;
export const MAX_INJECTION_DEPTH = 1000;
export const extension_prompt_types = { NONE: -1, IN_PROMPT: 0, IN_CHAT: 1, BEFORE_PROMPT: 2 };
export const extension_prompt_roles = { SYSTEM: 0, USER: 1, ASSISTANT: 2 };
export const system_message_types = { NARRATOR: 'narrator', GENERIC: 'generic' };
export const event_types = inert('event_types');
export const eventSource = { on() {}, once() {}, emit: async () => {}, removeListener() {} };
export const extension_prompts = state.extensionPrompts;

export function setNames(user, char) {
    name1 = user;
    name2 = char;
    state.userName = user;
    state.charName = char;
}

export function getMaxContextSize() { return 1000000; }
export function getCurrentChatId() { return 'harness'; }
export function saveSettingsDebounced() {}
/** A system message (never sent: the assembly leaves is_system messages out) at the chat's end. */
export function sendSystemMessage(type, text = '', extra = {}) {
    chat.push({ name: 'SillyTavern System', is_user: false, is_system: true, mes: text, extra: { ...extra, type } });
}
export function getRequestHeaders() { return {}; }

function cardFields() {
    const card = state.card ?? {};
    const plain = (text) => baseChatReplace((text ?? '').trim());
    const fields = {
        description: plain(card.description),
        personality: plain(card.personality),
        scenario: plain(card.scenario),
        mesExamples: plain(card.mes_example),
        system: plain(card.system_prompt),
        jailbreak: plain(card.post_history_instructions),
        persona: plain(state.persona),
        version: '',
    };
    // In a group, the shell takes the four joinable fields from group-chats.js's
    // getGroupCharacterCards (null in swap mode); group_assembly_driver.mjs installs the call.
    const joined = state.groupCharacterCards ? state.groupCharacterCards() : null;
    if (joined) {
        fields.description = joined.description;
        fields.personality = joined.personality;
        fields.scenario = joined.scenario;
        fields.mesExamples = joined.mesExamples;
    }
    return fields;
}
export { cardFields as getCharacterCardFields };

/** Names-only substitution (no card fields), as the shell applies to card text; group-chats.js
 * passes a member's name as `char`. */
export function baseChatReplace(value, user = undefined, char = undefined) {
    if (!value) return value ?? '';
    return substituteParams(value, user, char, undefined, undefined, false).replace(/\r/g, '');
}

export function substituteParams(content, user, char, original, group, withCard = true, extra = {}) {
    if (!content) return '';
    const env = {};
    if (typeof original === 'string') {
        let used = false;
        env.original = () => {
            if (used) return '';
            used = true;
            return original;
        };
    }
    if (withCard) {
        const fields = cardFields();
        env.charPrompt = fields.system;
        env.charJailbreak = fields.jailbreak;
        env.description = fields.description;
        env.personality = fields.personality;
        env.scenario = fields.scenario;
        env.persona = fields.persona;
        env.mesExamples = fields.mesExamples;
        env.charVersion = '';
        env.char_version = '';
    }
    env.user = user ?? name1;
    env.char = char ?? name2;
    // {{group}} / {{charIfNotGroup}}: in a group chat every member's name (the driver installs
    // state.groupMemberNames), else the character.
    const members = state.groupMemberNames ? state.groupMemberNames() : null;
    env.group = env.charIfNotGroup = typeof group === 'string' ? group : (members ?? (char ?? name2));
    env.model = '';
    Object.assign(env, extra ?? {});
    return evaluateMacros(content, env);
}

export function substituteParamsExtended(content, extra = {}) {
    return substituteParams(content, undefined, undefined, undefined, undefined, true, extra);
}

/** Extension prompts at a position (and depth and role), joined in key order. */
export function getExtensionPrompt(position = 0, depth = undefined, separator = '\n', role = undefined, wrap = true) {
    let text = Object.keys(state.extensionPrompts).sort()
        .map((key) => state.extensionPrompts[key])
        .filter((p) => p.position == position && p.value)
        .filter((p) => depth === undefined || p.depth === undefined || p.depth === depth)
        .filter((p) => role === undefined || p.role === undefined || p.role === role)
        .map((p) => p.value.trim())
        .join(separator);
    if (wrap && text && !text.startsWith(separator)) text = separator + text;
    if (wrap && text && !text.endsWith(separator)) text += separator;
    return text ? substituteParams(text) : text;
}

// For group_driver.mjs (group-chats.js running for real): the shell state its reply loop reads,
// and Generate() recording who it was called for, in order (nothing is generated).
export let isChatSaving = false;
export const talkativeness_default = 0.5;
export const depth_prompt_depth_default = 4;
export const depth_prompt_role_default = 'system';
export let online_status = 'connected';
export let menu_type = 'group_edit';
export function setCharacterId(id) {
    this_chid = id;
    state.groupChid = id;
}
export function setCharacterName(value) {
    name2 = value;
    state.charName = value;
}
export async function Generate() {
    state.generated.push(state.groupChid);
    return {};
}
export async function clearChat() {}
export function updateChatMetadata() {}
export async function printMessages() {}
export async function saveChatConditional() {}
export async function sendMessageAsUser() {}
export function getBiasStrings() { return {}; }
export async function loadItemizedPrompts() {}
