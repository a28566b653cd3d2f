"""`python -m absorb_formal` is `absorb-prove`."""

from .cli.prove import entry

entry()
