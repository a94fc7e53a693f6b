"""The features tier: what the Tavern does with its state — the prompt profile loader, the
SillyTavern prompt renderer, the Tavern's prompt sources, the MVU service and its script VM,
catalogs, RP mode, the play workspace, how a playthrough starts (opening drafts, opening books,
the opening rendering cache) and SillyTavern migration.

Imports the state and pure tiers only; no HTTP handler lives here (see docs/architecture.md
"The Tavern plugin's tiers").
"""
