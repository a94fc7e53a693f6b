// Innkeeper opening world-book test snapshot: "The Lantern Inn", alternate build (original).
// Same family as lantern-inn-openings.js: both carry every opening; neither is ever executed.
export const openings = { default: null, cellar: 3, rooftop: 2 };
