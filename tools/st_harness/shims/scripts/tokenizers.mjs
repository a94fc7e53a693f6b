// Stand-in for tokenizers.js: Innkeeper's estimate, ceil(characters / 3.5) per message content,
// so a budget that trims does so at the same point on both sides.
function estimate(message) {
    const text = typeof message?.content === 'string' ? message.content : '';
    return Math.ceil(text.length / 3.5) || 1;
}
export function countTokensOpenAI(messages) {
    const list = Array.isArray(messages) ? messages : [messages];
    return list.reduce((sum, m) => sum + estimate(m), 0);
}
export function getTokenizerModel() { return 'harness'; }
