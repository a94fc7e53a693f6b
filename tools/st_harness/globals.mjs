// The few browser globals SillyTavern's modules touch while loading or assembling: inert.
import { inert } from './shims/auto.mjs';

for (const name of ['$', 'jQuery', 'toastr', 'document', 'Handlebars', 'DOMPurify', 'moment', 'localStorage', 'sessionStorage', 'SillyTavern', 'showdown', 'Fuse', 'droll', 'navigator']) {
    if (!(name in globalThis) || name === 'navigator') {
        try { globalThis[name] = inert(name); } catch { /* read-only in this Node */ }
    }
}
globalThis.window = globalThis;
