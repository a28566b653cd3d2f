"""Writing safetensors files from tensors given as stored (dtype code, shape, bytes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Entry = tuple[str, str, list[int], bytes]  # name, safetensors dtype code, shape, raw bytes


def write_safetensors(target: Path, entries: list[Entry], metadata: dict[str, str]) -> None:
    """A new safetensors file (never replaces one: FileExistsError), tensors in order, the
    data section 8-aligned and tiled exactly as the format requires."""
    header: dict[str, Any] = {"__metadata__": metadata}
    offset = 0
    for name, code, shape, data in entries:
        header[name] = {"dtype": code, "shape": shape,
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(target, "xb") as stream:
        stream.write(len(raw).to_bytes(8, "little") + raw)
        for *_, data in entries:
            stream.write(data)
