// Stand-in for group-chats.js: one-to-one chats only (Innkeeper has no group chats yet).
export const selected_group = null;
export const is_group_generating = false;
export const groups = [];
