"""The repository's shape: import layers, exact paths, citations, self-containment, docs."""
