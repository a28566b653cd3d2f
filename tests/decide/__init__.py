"""The rules of docs/rules.md, decided concretely and for families."""
