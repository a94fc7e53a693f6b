"""Hello plugin."""
