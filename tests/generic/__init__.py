"""The generic engine (docs/rules.md §6, §7)."""
