"""The float cross-checks of exact verdicts."""
