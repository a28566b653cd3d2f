"""The checker's side of each rule of docs/rules.md: one module per rule, named as the
prover's module that produces the certificate (decide/canonical.py ↔ rules/canonical.py,
decide/width.py ↔ rules/width.py, decide/half_activation.py ↔ rules/half_activation.py, …).
`checker/dispatch.py`'s registry says which function here checks each certificate kind."""
