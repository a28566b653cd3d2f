"""An export whose memory estimate passes what the machine has (or `--memory SIZE`) is
refused before anything is allocated, with the estimate and the limit, exit 2; sizes are
read by one parser (`memory.parse_size`)."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from absorb_formal import export
from absorb_formal.export.files import read_export
from absorb_formal.export.rounding import ExportError
from absorb_formal.language import load_file
from absorb_formal.model import memory

from ..conftest import ROOT
from .test_export_command import SPEC  # its block R: relu, d = 2, absorbable at width 3


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "blocks.mlp"
    path.write_text(SPEC, encoding="utf-8")
    return path


@pytest.mark.parametrize(("text", "size"), [
    ("4096", 4096), ("300MB", 300 * 10**6), ("4GB", 4 * 10**9), ("4gb", 4 * 10**9),
    ("1.5GiB", 3 * 2**29), ("512k", 512_000), ("2 MiB", 2 * 2**20), ("1KB", 1000),
    ("0.5KiB", 512), ("1TB", 10**12)])
def test_sizes_are_read_in_decimal_and_binary_units(text, size):
    assert memory.parse_size(text) == size


@pytest.mark.parametrize("text", ["abc", "", "GB", "-1GB", "4 XB", "1e9", "0", "0.1",
                                  "1,5GB", "9" * 5000])
def test_anything_else_is_not_a_size(text):
    with pytest.raises(ValueError, match="not a size|less than one byte"):
        memory.parse_size(text)


def test_the_estimate_grows_with_the_width_and_the_dtype():
    one = memory.export_bytes(2, 10**6, 1, False, False, "float64")
    assert one >= 2 * 2 * 10**6 * 8  # up and down, 2 x 10^6 entries each, 8 bytes at least
    assert memory.export_bytes(2, 2 * 10**6, 1, False, False, "float64") == 2 * one
    assert memory.export_bytes(2, 10**6, 1, False, False, "bfloat16") < one
    assert memory.export_bytes(2, 10**6, 1, True, True, "float64") > 3 * one // 2  # gate
    assert memory.export_bytes(2, 10**6, 3, False, False, "float64") == 3 * one
    assert memory.available() > 0


def test_a_huge_width_is_refused_before_anything_is_allocated(tmp_path, spec):
    """In a process allowed 4 GiB of address space, a width of 10^9 (arrays of about 150
    GiB) is refused with the estimate and the limit; before, numpy's allocation failed with
    a traceback (or, without a limit, the kernel killed the process)."""
    out = tmp_path / "x.safetensors"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    run = subprocess.run([sys.executable, "-m", "absorb_formal", "export", str(spec), "R",
                          "--width", "1000000000", "--out", str(out)], cwd=ROOT,
                         capture_output=True, text=True, preexec_fn=limit, timeout=300)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    [line] = run.stderr.splitlines()
    assert line.startswith("absorb-prove export: error: block R at width 1000000000: it "
                           "needs about ")
    assert "GiB of memory, beyond the " in line and line.endswith(" available; nothing written")
    assert not out.exists()


def test_a_normal_export_still_writes(cli, spec, tmp_path):
    out = tmp_path / "r.safetensors"
    run = cli("export", spec, "R", "--out", out, "--points", "200", "--memory", "4GiB")
    assert run.code == 0, run.err
    arrays, record = read_export(out)
    assert arrays["up"].shape == (3, 2) and record["equals"].startswith("proved")


def test_a_memory_limit_below_the_estimate_refuses_a_normal_export(cli, spec, tmp_path):
    out = tmp_path / "r.safetensors"
    run = cli("export", spec, "R", "--out", out, "--memory", "1KB")
    assert run.code == 2 and run.out == "" and len(run.err.splitlines()) == 1
    assert "it needs about " in run.err and "beyond the --memory limit of 1000 bytes" in run.err
    assert not out.exists()
    run = cli("export", spec, "R", "--out", out, "--width", "50", "--memory", "1KB")
    assert run.code == 2 and "block R at width 50: it needs about " in run.err
    with pytest.raises(ExportError, match="--memory limit of 1000 bytes") as refused:
        export.export(spec, "R", out, memory=1000)
    assert refused.value.code == 2 and not out.exists()


@pytest.mark.parametrize("size", ["abc", "0", "4XB"])
def test_a_bad_memory_size_is_a_usage_error(cli, spec, tmp_path, size):
    run = cli("export", spec, "R", "--out", tmp_path / "r.npz", "--memory", size)
    assert run.code == 2 and "argument --memory: " in run.err and "Traceback" not in run.err
    assert not (tmp_path / "r.npz").exists()


def test_a_construction_chosen_for_a_scan_is_refused_beyond_the_memory_available(
        spec, monkeypatch):
    """`choose` (what scan --export calls) checks each construction, by default against
    the memory available now (here: said to be 1 MiB)."""
    monkeypatch.setattr(memory, "available", lambda: 2**20)
    found = export.find_witness(load_file(spec).blocks["R"], 10**6)
    with pytest.raises(ExportError, match=r"at width 1000000 was not built \(it needs about "
                                          r".* beyond the 1 MiB available\)"):
        export.choose(found, "float64", 0, 1.0)


def test_the_exact_comparison_is_not_tried_beyond_the_limit(spec):
    block = load_file(spec).blocks["R"]
    found = export.find_witness(block, 3)
    rounded, _ = export.built(found, "float64", 0)
    assert export.proved_equal(block, rounded).startswith("proved")
    assert export.proved_equal(block, rounded, memory=1).startswith(
        "not tried: the exact comparison it needs about ")


def test_the_help_documents_memory(cli):
    out = cli("export", "--help").out
    assert "--memory SIZE" in out and "1.5GiB" in out
