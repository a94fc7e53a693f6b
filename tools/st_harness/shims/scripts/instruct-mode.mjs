// Stand-in for instruct-mode.js: instruct mode is off for Chat Completion.
export function replaceInstructMacros(text) { return text; }
