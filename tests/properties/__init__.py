"""Property-based tests: random blocks against known truth, grammar fuzzing, extremes."""
