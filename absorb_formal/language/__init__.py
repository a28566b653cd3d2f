"""The `.mlp` language: grammar, parse, validate, load (LANGUAGE.md)."""

from .errors import Diagnostic, SpecError
from .load import load_file, load_text

__all__ = ["Diagnostic", "SpecError", "load_file", "load_text"]
