"""The Tavern bundle: SillyTavern-compatible resources, activation and MVU state."""
