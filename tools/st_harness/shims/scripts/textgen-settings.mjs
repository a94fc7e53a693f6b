export const textgenerationwebui_banned_in_macros = [];
