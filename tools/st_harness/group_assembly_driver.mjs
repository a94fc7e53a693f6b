// Runs SillyTavern's Chat Completion assembly for one speaker of a group chat, for each case
// read from stdin, and prints {caseId: [{role, content, name?}]}. group-chats.js runs as it is
// (group_register.mjs): it opens the group (a new chat starts with every member's greeting,
// getFirstCharacterMessage), joins the members' cards (getGroupCharacterCards) and their depth
// prompts (getGroupDepthPrompts), and openai.js reads its selected_group for the group rules
// (names, the group's new-chat prompt, the group nudge, named example lines).
//
// A case: {id, preset, settings, user: {name, persona}, lore, group: <ST group file>,
// characters: [<ST character: name, avatar, description, personality, scenario, first_mes,
// mes_example, data: {system_prompt, post_history_instructions, extensions: {depth_prompt}}>],
// played: [<ST message after the greetings>], speaker: <member avatar>, type}. Each case's
// group has its own id: openGroupById reopens (and starts a new chat) only for another group.
//
// What this file does itself is what the app shell does (script.js): the group reply loop's
// setCharacterId / setCharacterName for the speaker, then Generate()'s steps before the
// assembly, as driver.mjs does for one character.
import { readFileSync } from 'node:fs';

console.log = console.info = console.debug = console.table = console.warn = () => {};

const openai = await import('st:scripts/openai.js');
const groupChats = await import('st:scripts/group-chats.js');
const shell = await import(new URL('./shims/script.mjs', import.meta.url).href);
const { power_user } = await import(new URL('./shims/scripts/power-user.mjs', import.meta.url).href);
const { extension_settings } = await import(new URL('./shims/scripts/extensions.mjs', import.meta.url).href);
const { state } = await import(new URL('./shims/state.mjs', import.meta.url).href);
const { inert } = await import(new URL('./shims/auto.mjs', import.meta.url).href);
const { resetCase, assemble, ROLES } = await import(new URL('./common.mjs', import.meta.url).href);

for (const name of ['CSS']) globalThis[name] = inert(name);

let current = null;
globalThis.fetch = async (url) => {
    // The group list; the group's chat file: empty, so getGroupChat starts a new chat.
    const body = String(url).includes('/api/groups/all') ? [current.group] : [];
    return { ok: true, status: 200, json: async () => structuredClone(body) };
};

// script.js's getGroupValue (substituteParams): every member's name, in the group's order.
state.groupMemberNames = () => {
    const id = groupChats.selected_group;
    if (!id) return null;
    const group = groupChats.groups.find((g) => g.id === id);
    const members = Array.isArray(group?.members) ? group.members : [];
    return members.map((m) => shell.characters.find((c) => c.avatar === m)?.name).filter(Boolean).join(', ');
};
// script.js's getCharacterCardFields, group part.
state.groupCharacterCards = () => {
    const id = groupChats.selected_group;
    return id ? groupChats.getGroupCharacterCards(id, Number(shell.this_chid)) : null;
};

/** The fields of characters[this_chid] as the shell's getCharacterCardFields reads them. */
function cardOf(character) {
    if (!character) return null;
    return {
        description: character.description,
        personality: character.personality,
        scenario: character.scenario,
        mes_example: character.mes_example,
        system_prompt: character.data?.system_prompt,
        post_history_instructions: character.data?.post_history_instructions,
    };
}

/** Generate()'s depth prompts: every member's in a joined group, else the speaker's own. */
function setDepthPrompts(speaker) {
    const prompts = groupChats.getGroupDepthPrompts(groupChats.selected_group, Number(shell.this_chid));
    const role = (name) => (typeof name === 'number' ? name : ROLES[name] ?? 0);
    if (Array.isArray(prompts) && prompts.length > 0) {
        prompts.forEach((p, index) => {
            state.extensionPrompts['DEPTH_PROMPT_' + index] = {
                value: String(p.text), position: 1, depth: Number(p.depth), role: role(p.role),
            };
        });
        return;
    }
    const depth = speaker.data?.extensions?.depth_prompt;
    const text = shell.baseChatReplace(depth?.prompt?.trim()) || '';
    state.extensionPrompts.DEPTH_PROMPT = {
        value: text, position: 1, depth: Number(depth?.depth ?? 4), role: role(depth?.role ?? 'system'),
    };
}

async function run(kase) {
    current = kase;
    const settings = resetCase(openai, kase, { shell, power_user, extension_settings, state });
    shell.characters.splice(0, shell.characters.length, ...structuredClone(kase.characters));
    shell.chat.length = 0;
    shell.setNames(kase.user.name, '');
    state.card = null;
    openai.__harnessResetPromptManager();
    openai.setupChatCompletionPromptManager(settings);

    // Open the group: a new chat, every member's greeting (group-chats.js).
    await groupChats.getGroups();
    await groupChats.openGroupById(kase.group.id);
    for (const message of kase.played) shell.chat.push(structuredClone(message));

    // The reply loop's choice of the speaker.
    const chid = shell.characters.findIndex((c) => c.avatar === kase.speaker);
    shell.setCharacterId(chid);
    shell.setCharacterName(shell.characters[chid].name);
    state.card = cardOf(shell.characters[chid]);
    setDepthPrompts(shell.characters[chid]);

    const chat = shell.chat;
    if (chat.length) chat[0].mes = shell.substituteParams(chat[0].mes);
    const coreChat = chat.filter((m) => !m.is_system);
    let cyclePrompt = '';
    if (kase.type === 'continue' && coreChat.length) {
        cyclePrompt = coreChat[coreChat.length - 1].mes;
        if (!cyclePrompt.endsWith(' ')) cyclePrompt += settings.continue_postfix;
    }
    return assemble(openai, shell, {
        name2: shell.name2,
        chat: coreChat,
        lore: kase.lore,
        type: kase.type === 'normal' ? 'group_chat' : kase.type,
        cyclePrompt,
        extensionPrompts: state.extensionPrompts,
    });
}

const cases = JSON.parse(readFileSync(0, 'utf8'));
const out = {};
for (const kase of cases) {
    try {
        out[kase.id] = await run(kase);
    } catch (err) {
        out[kase.id] = { error: String(err && err.stack ? err.stack : err) };
    }
}
// group-chats.js starts its auto-mode timer at load: leave once the answer is written.
process.stdout.write(JSON.stringify(out), () => process.exit(0));
