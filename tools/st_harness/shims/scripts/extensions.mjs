// Stand-in for extensions.js: global variables live here ({{setglobalvar}}).
export const extension_settings = { variables: { global: {} }, note: {} };
export function saveMetadataDebounced() {}
export function getContext() { return {}; }
