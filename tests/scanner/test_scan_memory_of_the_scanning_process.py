"""What the scanning process holds: a scan that decides its sublayers in other processes (a pool
or a Dask cluster) reads and checks each tensor here, then keeps only its shape; the values
are read again where they are asked for (an export, a certificate), and a tensor changed
since is refused, never used."""

from __future__ import annotations

import shutil
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from absorb_formal.scanner.run import scan
from absorb_formal.weights.arrays import ArrayError
from absorb_formal.weights.safetensors import write as write_safetensors

from .test_scan_by_naming_convention import gpt2
from .test_scan_results_resume import relu_stack

LAYERS, D, M = 4, 128, 1024  # each tensor 512 KiB of float32, 4 MiB in all


def _held_by_the_readers(run: Callable[[], Any]) -> tuple[Any, int]:
    """(what `run()` returns, the bytes still held that weights/ allocated while it ran)."""
    tracemalloc.start(1)
    try:
        before = tracemalloc.take_snapshot()
        value = run()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    readers = [tracemalloc.Filter(True, "*absorb_formal*weights*")]
    grown = after.filter_traces(readers).compare_to(before.filter_traces(readers), "filename")
    return value, sum(max(0, stat.size_diff) for stat in grown)


def test_a_scan_decided_in_other_processes_keeps_no_tensor_values_here(tmp_path):
    folder = relu_stack(tmp_path / "s", layers=LAYERS, d=D, m=M)
    total = LAYERS * 2 * D * M * 4
    spread, held_spread = _held_by_the_readers(lambda: scan(folder, workers=2, cluster=False))
    copy = shutil.copytree(folder, tmp_path / "copy")  # another path: not served from a cache
    alone, held_alone = _held_by_the_readers(lambda: scan(copy))
    assert held_alone >= total  # deciding here: every tensor is held by its block
    assert held_spread < total // (2 * LAYERS)  # less than one tensor
    assert [b.as_json()["absorbable"] for b in spread.blocks] == \
        [b.as_json()["absorbable"] for b in alone.blocks]
    block = next(iter(spread.report.spec.blocks.values()))
    up = block.layers[0].up
    assert up.shape == (M, D)
    assert np.array_equal(up.loaded, next(iter(alone.report.spec.blocks.values()))
                          .layers[0].up.loaded)  # read again when asked for: the same values


def test_a_tensor_changed_since_it_was_checked_is_refused_when_read_again(tmp_path):
    folder = relu_stack(tmp_path / "s", layers=1, d=3, m=4)
    spread = scan(folder, workers=2, cluster=False)
    with open(folder / "model.safetensors", "wb") as stream:  # another width: 5, not 4
        write_safetensors(stream, {"h.0.mlp.c_fc.weight": np.ones((3, 5), np.float32),
                                   "h.0.mlp.c_proj.weight": np.ones((5, 3), np.float32)}, {})
    up = next(iter(spread.report.spec.blocks.values())).layers[0].up
    with pytest.raises(ArrayError, match="changed since it was read"):
        up.loaded  # noqa: B018 - reading it is the test


def test_an_export_after_a_scan_decided_elsewhere_writes_the_same_checkpoint(cli, tmp_path):
    folder = gpt2(tmp_path / "g", norms=False)
    here = cli("scan", folder, "--export", tmp_path / "here", "--json")
    pooled = cli("scan", folder, "-j", "2", "--no-cluster", "--export", tmp_path / "pool",
                 "--json")
    assert here.code == pooled.code == 0, pooled.err
    for name in ("model.safetensors", "config.json"):
        assert (tmp_path / "pool" / name).read_bytes() == (tmp_path / "here" / name).read_bytes()
