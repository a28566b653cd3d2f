"""What the scanning process holds: a scan that decides its sublayers in other processes (a pool
or a Dask cluster) reads and checks each tensor here, then keeps only its shape; the values
are read again where they are asked for (an export, a certificate), and a tensor changed
since is refused, never used. A process that decides many scans (a worker) never decides a
changed checkpoint on the values it read before."""

from __future__ import annotations

import json
import shutil
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from absorb_formal.scanner.run import scan
from absorb_formal.weights import common
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


@pytest.mark.parametrize("width", [4, 5])  # the same shapes with other values, or another width
def test_a_tensor_changed_since_it_was_checked_is_refused_when_read_again(tmp_path, width):
    folder = relu_stack(tmp_path / "s", layers=1, d=3, m=4)
    spread = scan(folder, workers=2, cluster=False)
    with open(folder / "model.safetensors", "wb") as stream:
        write_safetensors(stream, {"h.0.mlp.c_fc.weight": np.ones((3, width), np.float32),
                                   "h.0.mlp.c_proj.weight": np.ones((width, 3), np.float32)}, {})
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


def _planted(folder: Path, down: list[list[float]]) -> Path:
    """One relu sublayer, d = 2, m = 3, up = [[1, 0], [0, 1], [1, 1]] (GPT-2's layout)."""
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {"h.0.mlp.c_fc.weight": np.array([[1, 0], [0, 1], [1, 1]], np.float32).T.copy(),
               "h.0.mlp.c_proj.weight": np.array(down, np.float32).T.copy()}
    with open(folder / "model.safetensors", "wb") as stream:
        write_safetensors(stream, tensors, {})
    (folder / "config.json").write_text(json.dumps({"n_embd": 2, "n_inner": 3,
                                                    "activation_function": "relu"}))
    return folder


@pytest.mark.parametrize("workers", [1, 2])
def test_a_checkpoint_changed_between_two_scans_is_decided_on_its_new_values(
        tmp_path, monkeypatch, workers):
    monkeypatch.setattr(common, "SETTLED_NS", 0)  # every file settled: the caches may serve it
    folder = _planted(tmp_path / "ck", [[-1, 0, 0.75], [0, -1, 0.25]])  # W_down[:,J] W_up[J,:] = -I
    first = scan(folder, workers=workers, cluster=False)
    assert [b.absorbable for b in first.blocks] == ["yes"]
    _planted(folder, [[1, 0, 0.75], [0, 1, 0.25]])  # the same shapes, no longer absorbable
    again = scan(folder, workers=workers, cluster=False)
    assert [b.absorbable for b in again.blocks] == ["no"]
