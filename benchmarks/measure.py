"""Run one measured job in this (fresh) interpreter; print {"peak_mb": …} last on stderr.

  python benchmarks/measure.py prove ARGS…        absorb-prove ARGS…
  python benchmarks/measure.py load-npz FILE      numpy loads every array of an .npz
  python benchmarks/measure.py load-safetensors FILE
                                                  numpy reads every tensor (bf16 widened to
                                                  float32, as any numeric use needs)
"""

from __future__ import annotations

import json
import resource
import sys


def load_npz(path: str) -> None:
    import numpy as np

    with np.load(path) as z:
        for key in z.files:
            z[key]


def load_safetensors(path: str) -> None:
    import numpy as np

    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
        for name, info in header.items():
            if name == "__metadata__":
                continue
            start, end = info["data_offsets"]
            assert info["dtype"] == "BF16"
            f.seek(8 + size + start)
            half = np.fromfile(f, dtype="<u2", count=(end - start) // 2)
            np.left_shift(half, 16, dtype=np.uint32).view(np.float32).reshape(info["shape"])


def main() -> int:
    job, args = sys.argv[1], sys.argv[2:]
    code = 0
    if job == "prove":
        from absorb_formal.cli import main as prove

        code = prove(args, sys.stdout, sys.stderr)
    elif job == "load-npz":
        load_npz(args[0])
    elif job == "load-safetensors":
        load_safetensors(args[0])
    else:
        raise SystemExit(f"unknown job {job}")
    print(json.dumps({"peak_mb": round(peak_mb(), 1)}), file=sys.stderr)
    return code


def peak_mb() -> float:
    """This process's peak resident set: VmHWM (ru_maxrss would include the parent's peak,
    inherited across fork and exec)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if __name__ == "__main__":
    sys.exit(main())
