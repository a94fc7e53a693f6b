export const debounce_timeout = { quick: 100, short: 200, standard: 300, relaxed: 1000, extended: 5000 };
