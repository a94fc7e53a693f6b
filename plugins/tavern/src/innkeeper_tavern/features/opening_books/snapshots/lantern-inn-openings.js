// Innkeeper opening world-book test snapshot: "The Lantern Inn" (original test data).
// The host verifies this text's URL, SHA-256 and size against the manifest; it never runs it.
export const openings = {
  default: null,
  cellar: ['cellar-door', 'smuggler-ledger', 'cold-lantern'],
  rooftop: ['weathervane', 'night-signal'],
};
