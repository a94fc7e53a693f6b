"""The Innkeeper host."""
