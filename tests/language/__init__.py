"""The `.mlp` language: literals, parsing, positioned errors."""
