"""The files a command is given: spec files or certificate documents, folders searched."""

from __future__ import annotations

from pathlib import Path


def collect(paths: list[str], pattern: str) -> list[tuple[Path, str, str] | str]:
    """(file, shown name, name relative to its PATH) for every file matching `pattern` under
    PATHs, in a stable order; a str is an error message."""
    found: list[tuple[Path, str, str] | str] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files = sorted(f for f in path.rglob(pattern) if f.is_file())  # no FIFO, no folder
            if not files:
                found.append(f"{given}: error: no {pattern} files in this folder")
            found += [(f, str(Path(given) / f.relative_to(path)), str(f.relative_to(path)))
                      for f in files]
        elif path.is_file():
            found.append((path, given, relative_name(path)))
        elif path.exists():
            found.append(f"{given}: error: not a regular file")
        else:
            found.append(f"{given}: error: no such file or folder")
    return found


def relative_name(path: Path) -> str:
    """A file given directly: its path relative to the working directory when it lies below
    it (so `a/x.mlp` and `b/x.mlp` get different certificate names), else its file name."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.name
