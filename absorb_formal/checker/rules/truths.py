"""What a rule settles about a family, modality by modality (docs/rules.md, "Families"): a
family never absorbable is not sometimes and not always, always is sometimes, sometimes is
not never, generically not is not always. Shared by the checks that answer family claims
(rules/families.py, the never-proofs, rules/sublayer.py)."""

NEVER = {"never": True, "generically not": True, "sometimes": False, "always": False}
ALWAYS = {"always": True, "sometimes": True, "never": False, "generically not": False}
SOMETIMES = {"sometimes": True, "never": False}
GENERICALLY_NOT = {"generically not": True, "always": False}
