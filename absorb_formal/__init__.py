"""absorb_formal: can an MLP absorb its own skip connection? Decided exactly, with certificates."""

__version__ = "0.1.0"
