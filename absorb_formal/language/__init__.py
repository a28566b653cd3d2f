"""The `.mlp` language: grammar, parse, validate, load (docs/language.md)."""

from .errors import Diagnostic, SpecError
from .load import activation_named, load_file, load_text

__all__ = ["Diagnostic", "SpecError", "activation_named", "load_file", "load_text"]
