"""`python -m absorb_formal` is `absorb-prove`."""

from .cli import entry

entry()
