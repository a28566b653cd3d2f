"""The generic engine (docs/rules.md §6): decides small cases from the definitions alone —
polynomial equations (Gröbner bases, nlsat) and counterexample-guided synthesis (z3) —
and serves as an independent check of the theory engine."""
