"""Decision: every claim and query goes to `dispatch.decide`, which picks the rule."""

from .dispatch import decide

__all__ = ["decide"]
