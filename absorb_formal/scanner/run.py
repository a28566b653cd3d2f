"""Deciding what scan found: one generated spec, decided by the ordinary prover.

Each sublayer becomes a block that loads its tensors from the checkpoint's files, with two
statements: `claim NAME is absorbable` (the answer at the block's own width, with a
certificate) and `query NAME` (the minimal width: exact, or proved bounds). The spec is the
whole question: `--write-spec` stores it, with each outcome as its `# expect:`, so that
`absorb-prove --expect FILE` reproduces the answers and the file can join a corpus.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..api import DEFAULT_TIMEOUT, StatementResult, decide_spec
from ..language import SpecError, load_text
from ..model.blocks import Spec
from ..report import Entry, FileReport
from .find import Checkpoint, ScanError, find_blocks, needs_copies, open_checkpoint
from .found import FoundBlock, FoundNorm, Skipped, TensorRef


@dataclass(frozen=True)
class BlockAnswer:
    """The answer for one sublayer (one row of scan's table, one item of its JSON).

    absorbable: "yes" | "no" | "unknown", at the block's own width; min_width: [lo, hi],
    proved bounds on the minimal width (lo = hi when it is exact; hi None when no width is
    known to work, e.g. a never-absorbable block: then lo is None too); method: the rule
    that decided; reason: why something is unknown; seconds: the time both took."""

    block: FoundBlock
    absorbable: str
    min_width: tuple[int | None, int | None]
    method: str
    reason: str
    seconds: float
    claim: StatementResult | None = None
    query: StatementResult | None = None
    # the bare block S x + F(x) (the paper's question), when the sublayer is another block
    bare: BlockAnswer | None = None

    @property
    def any_width(self) -> str:
        """Is the question absorbable at some width: yes, no (proved: none), unknown."""
        lo, hi = self.min_width
        return "yes" if hi is not None else ("no" if lo is None else "unknown")

    @property
    def normalised(self) -> bool:
        """The sublayer the model computes has a norm beside the FFN (or one not placed)."""
        return self.block.norm is not None

    @property
    def proved_width(self) -> int | None:
        """The smallest width at which the block is proved absorbable (for --export)."""
        if self.absorbable == "yes":
            low = self.min_width[0]
            return low if low is not None and self.min_width[1] == low else self.block.width
        return self.min_width[1]

    def as_json(self) -> dict[str, Any]:
        b = self.block
        norm = b.norm
        bare = self.bare if self.bare is not None else self
        return {"name": b.name, "where": b.where, "activation": b.activation, "dim": b.dim,
                "width": b.width, "bias": b.biased, "absorbable": self.absorbable,
                "min_width": list(self.min_width), "method": self.method,
                "reason": self.reason, "seconds": round(self.seconds, 3),
                "notes": list(b.notes),
                "norm": {"kind": norm.kind or None if norm else None,
                         "placement": norm.placement if norm else None,
                         "eps": norm.eps or None if norm else None},
                "any_width": self.any_width,
                "bare": {"question": "the paper's question: the bare block S x + F(x)",
                         "absorbable": bare.absorbable, "min_width": list(bare.min_width),
                         "any_width": bare.any_width, "method": bare.method,
                         "reason": bare.reason}}


@dataclass
class ScanReport:
    path: Path
    blocks: list[BlockAnswer] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    spec_text: str = ""
    report: FileReport | None = None
    interrupted: bool = False
    checkpoint: Checkpoint | None = None
    # the results file: {"file", "reused": [where...], "stored": N} (None: none was used)
    results: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)  # what the scan said on the way

    def as_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "blocks": [b.as_json() for b in self.blocks],
                "skipped": [{"where": s.where, "why": s.why} for s in self.skipped],
                "results": self.results}


# ---- the spec --------------------------------------------------------------------------------

def _load(ref: TensorRef, root: Path, folder: Path) -> str:
    file = Path(os.path.relpath(root / ref.file, folder)).as_posix()
    for text in (file, ref.key):
        if '"' in text or "\\" in text or "\n" in text:
            raise ScanError(f"{ref.file}: tensor {ref.key!r}: a name with a quote, backslash "
                            "or newline cannot be written in a spec")
    return f'load("{file}", "{ref.key}")' + (".T" if ref.transpose else "")


def spec_lines(blocks: list[FoundBlock], root: Path, folder: Path, source: str
               ) -> tuple[list[str], dict[str, tuple[int, int]]]:
    """The spec's lines (loads relative to `folder`, where the spec is or will be) and, per
    block, the line numbers of its claim and its query."""
    lines = [f"# Generated by `absorb-prove scan {source}`: one block per MLP sublayer, the",
             "# sublayer the model computes (with its norm clause, read from config.json or",
             "# the graph), and the bare block x -> x + MLP(x) (the paper's question) as",
             "# NAME_bare; tensors are loaded exactly.", ""]
    where: dict[str, tuple[int, int]] = {}
    for b in blocks:
        lines.append(f"# {b.where}" + (f" ({', '.join(b.notes)})" if b.notes else ""))
        norm = b.norm
        if norm is not None and norm.known:
            lines.append(f"# {norm.placement}-norm {norm.kind}: {norm.source}")
            lines += _block_lines(b, b.name, root, folder, _norm_clause(norm, root, folder))
            lines += [f"claim {b.name} is absorbable", f"query {b.name}"]
            where[b.name] = (len(lines) - 1, len(lines))
            lines.append("# the paper's question: the bare block x + MLP(x), without the norm")
        elif norm is not None:
            lines.append(f"# the sublayer is not decided: {norm.source}")
            lines.append("# the paper's question: the bare block x + MLP(x), without the norm")
        name = bare_name(b)
        lines += _block_lines(b, name, root, folder, None)
        lines += [f"claim {name} is absorbable", f"query {name}"]
        where[name] = (len(lines) - 1, len(lines))
        lines.append("")
    return lines, where


def bare_name(block: FoundBlock) -> str:
    """The bare block's name in the spec: the block's own when no norm sits beside it."""
    return block.name if block.norm is None else f"{block.name}_bare"


def _block_lines(b: FoundBlock, name: str, root: Path, folder: Path, norm: str | None
                 ) -> list[str]:
    lines = [f"block {name} {{", f"    activation {b.activation}",
             f"    dim {b.dim}  width {b.width}"]
    if b.biased:
        lines.append("    bias")
    if norm is not None:
        lines.append(f"    {norm}")
    for part in ("up", "gate", "down", "up_bias", "gate_bias", "down_bias"):
        ref = getattr(b, part)
        if ref is not None:
            lines.append(f"    {part} = {_load(ref, root, folder)}")
    return [*lines, "}"]


def _norm_clause(norm: FoundNorm, root: Path, folder: Path) -> str:
    """`norm PLACEMENT KIND { eps E gamma = load(...) [+ c] beta = load(...) } [KIND {...}]`."""
    def one(n: FoundNorm) -> str:
        items = [f"eps {n.eps}"]
        if n.gamma is not None:
            offset = "" if n.gamma_offset in ("0", "") else f" + {n.gamma_offset}"
            items.append(f"gamma = {_load(n.gamma, root, folder)}{offset}")
        if n.beta is not None:
            items.append(f"beta = {_load(n.beta, root, folder)}")
        return f"{n.kind} {{ {'  '.join(items)} }}"

    second = f" {one(norm.second)}" if norm.second is not None else ""
    return f"norm {norm.placement} {one(norm)}{second}"


def with_expectations(lines: list[str], report: FileReport) -> str:
    """The spec text with each statement's outcome as its `# expect:` (same line numbers)."""
    out = list(lines)
    for entry in report.entries:
        n = entry.statement.pos.line
        out[n - 1] = f"{out[n - 1]}  # expect: {entry.result.outcome}"
    return "\n".join(out) + "\n"


# ---- deciding --------------------------------------------------------------------------------

def scan(path: Path | str, *, activation: str | None = None, timeout: float = DEFAULT_TIMEOUT,
         spec_file: Path | None = None, progress: Callable[[FoundBlock], None] | None = None,
         workers: int = 1, force_activation: bool = False, cluster: Any = None,
         results: Path | str | None = None, notify: Callable[[str], None] | None = None
         ) -> ScanReport:
    """Find and decide every MLP sublayer of the checkpoint at `path`. `activation`: the
    activation to decide where the checkpoint names none, or the same as it names (another
    one only with `force_activation`). `spec_file`: where the spec will be written (its
    loads are relative to that folder); raises ScanError for a checkpoint that cannot be
    read, SpecError when a tensor cannot be loaded as stated.

    `workers` > 1 decides that many sublayers at once: on a Dask LocalCluster of that many
    worker processes when the `dask` extra is installed, else in a process pool. `cluster`:
    "local:N", a Dask scheduler's address ("tcp://HOST:PORT") or a `distributed.Client`, to
    decide there (`scanner/cluster.py`); False for the process pool even with dask
    installed. `results`: an SQLite file where each decided sublayer is kept as it arrives,
    and from which a later scan takes what it holds (`scanner/results.py`; None: none).
    `notify`: called with each line the scan has to say on the way (results reused, the
    cluster, a results file not used); the lines are also in `report.notes`."""
    scratch = None
    copies = spec_file.parent if spec_file is not None else None
    if copies is None and needs_copies(Path(path)):
        scratch = Path(tempfile.mkdtemp(prefix="absorb-scan-"))
        copies = scratch
    try:
        checkpoint = open_checkpoint(Path(path), copies)
        blocks, skipped = find_blocks(checkpoint, activation, force_activation)
    except BaseException:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        raise
    result = ScanReport(Path(path), skipped=skipped, checkpoint=checkpoint)
    if scratch is not None:  # the copies live as long as the report that loads them
        weakref.finalize(result, shutil.rmtree, scratch, True)
    if not blocks:
        return result
    folder = (spec_file.parent if spec_file is not None else checkpoint.root).resolve()
    lines, where = spec_lines(blocks, checkpoint.root.resolve(), folder, str(path))
    result.spec_text = "\n".join(lines) + "\n"
    shown = str(spec_file) if spec_file is not None else f"<scan of {path}>"
    report = FileReport(shown)
    asked = [where.get(b.name, ()) + where[bare_name(b)] for b in blocks]
    from . import cluster as dask_cluster

    runner = dask_cluster.chosen(workers, cluster)
    spread = runner is not None or workers > 1  # elsewhere: each job reads its own tensors
    try:  # decided elsewhere: here each tensor is read and checked, then only its shape kept
        report.spec = _spec(result.spec_text, shown, folder, hold=not spread)
    except SpecError as error:
        raise ScanError(_spec_error(error, checkpoint)) from None
    own = _own_texts(lines, asked) if spread or results is not None else None
    jobs = [(own[i] if spread and own else result.spec_text, shown, folder, asked[i], timeout)
            for i in range(len(blocks))]

    def say(line: str) -> None:
        result.notes.append(line)
        if notify is not None:
            notify(line)

    outcomes = _outcomes(blocks, jobs, report.spec, workers, runner, progress,
                         None if results is None else Path(results), own, result, say)
    for block, (entries, interrupted, seconds) in zip(blocks, outcomes, strict=False):
        report.entries += entries
        by_line = {e.statement.pos.line: StatementResult.of(e) for e in entries}
        if interrupted:
            result.interrupted = True
            break
        claim_line, query_line = where[bare_name(block)]
        bare = answer(block, by_line.get(claim_line), by_line.get(query_line), seconds)
        if block.norm is None:
            result.blocks.append(bare)
            continue
        if not block.norm.known:
            result.blocks.append(BlockAnswer(block, "unknown", (1, None), "", block.norm.source,
                                             seconds, bare=bare))
            continue
        claim_line, query_line = where[block.name]
        result.blocks.append(replace(answer(block, by_line.get(claim_line),
                                            by_line.get(query_line), seconds), bare=bare))
    result.report = report
    return result


# One validated spec per process (a worker decides many sublayers of it), keyed on its text
# and on the version of every file it loads.
_SPECS: dict[tuple[Any, ...], Spec] = {}


def _spec(text: str, shown: str, folder: Path, hold: bool = True) -> Spec:
    """The spec of `text`, validated again unless this process validated the same text while
    every file it loads had the version it has now. A file changed since (same shapes, other
    values) gives a new spec, never the old values; a file changed in the last seconds, whose
    version may not show it yet (`weights.common.settled`), is never served from here."""
    versions = _versions(text, folder)
    if versions is None:
        _SPECS.clear()
        return load_text(text, shown, folder, hold)
    key = (text, shown, folder, hold, versions)
    if key not in _SPECS:
        _SPECS.clear()
        _SPECS[key] = load_text(text, shown, folder, hold)
    return _SPECS[key]


def _versions(text: str, folder: Path) -> tuple[Any, ...] | None:
    """The version of each file the text's `load(...)`s read, in order; None when one cannot
    be read or has not settled."""
    from ..weights.arrays import version
    from ..weights.common import settled
    from .results import LOAD

    found = []
    for name in sorted({match.group(1) for match in LOAD.finditer(text)}):
        try:
            stamp = version(folder / name)
        except (OSError, ValueError):
            return None
        if not settled(stamp):
            return None
        found.append((name, stamp))
    return tuple(found)


Job = tuple[str, str, Path, tuple[int, ...], float]


def _decide_block(job: Job) -> tuple[list[Entry], bool, float]:
    text, shown, folder, lines, timeout = job
    spec = _spec(text, shown, folder)
    start = time.perf_counter()
    entries, interrupted = decide_spec(
        spec, [s for s in spec.statements if s.pos.line in lines], timeout=timeout)
    return entries, interrupted, time.perf_counter() - start


def _own_texts(lines: list[str], asked: list[tuple[int, ...]]) -> list[str]:
    """Each sublayer's spec text: the whole spec with every other sublayer's lines blank, so
    that its statements keep their line numbers and a worker reads only its tensors."""
    texts, start = [], 1
    for numbers in asked:
        end = max(numbers)
        texts.append("\n".join(line if start <= n <= end else ""
                               for n, line in enumerate(lines, 1)) + "\n")
        start = end + 1
    return texts


Outcome = tuple[list[Entry], bool, float]


def _outcomes(blocks: list[FoundBlock], jobs: list[Job], spec: Spec, workers: int, runner: Any,
              progress: Callable[[FoundBlock], None] | None, results: Path | None,
              own: list[str] | None, report: ScanReport, say: Callable[[str], None]
              ) -> list[Outcome]:
    """Each block's decision, in block order, up to the first one interrupted: taken from
    the results file where it holds the block's question, else decided (here, by `workers`
    processes, or on the Dask cluster `runner`) and stored there as it arrives."""
    from . import results as kept

    found: dict[int, Outcome] = {}
    keys: dict[int, str] = {}
    questions: dict[int, str] = {}
    store = kept.Store(results, say) if results is not None else None
    if store is not None and not store.usable:
        store = None
    tool = kept.tool_key()
    if store is not None and own is not None:
        for i, (block, job) in enumerate(zip(blocks, jobs, strict=True)):
            try:
                questions[i] = kept.question(own[i], job[2])
                keys[i] = kept.row_key(questions[i], tool)
            except ValueError:  # a tensor that cannot be read: decided (and said) below
                continue
            text = store.get(keys[i])
            rebuilt = None if text is None else kept.entries_from(text, spec, job[3])
            if rebuilt is not None:
                found[i] = (rebuilt[0], False, rebuilt[1])
                if progress is not None:
                    progress(block)
        report.results = {"file": str(results), "reused": [blocks[i].where for i in found],
                          "stored": 0}
        if found:
            say(f"results: {results}: {len(found)} of {len(blocks)} sublayer(s) already "
                "decided there, not decided again")
        missing = [questions[i] for i in questions if i not in found]
        for other, count in sorted(store.others(tool, missing).items()):
            say(f"results: {results}: {count} sublayer(s) stored there by other code "
                f"({other}; this is {tool}) are decided again: answers are kept per "
                "version of the code that decides")
    todo = [i for i in range(len(blocks)) if i not in found]
    try:
        for i, value, tool_used in _decided(todo, blocks, jobs, spec, workers, runner,
                                             progress, say):
            found[i] = value
            entries, interrupted, seconds = value
            if interrupted:
                break
            if store is not None and i in keys and (text := kept.payload(entries, seconds)):
                if tool_used != tool:
                    say(f"results: the workers decide with {tool_used}, not {tool}: their "
                        "answers are not stored")
                    continue
                store.put(keys[i], blocks[i].name, blocks[i].where, tool, text)
    finally:
        if store is not None:
            if report.results is not None:
                report.results["stored"] = store.stored
            store.close()
    ordered = []
    for i in range(len(blocks)):
        if i not in found:
            break
        ordered.append(found[i])
        if found[i][1]:
            break
    return ordered


def _decided(todo: list[int], blocks: list[FoundBlock], jobs: list[Job], spec: Spec,
             workers: int, runner: Any, progress: Callable[[FoundBlock], None] | None,
             say: Callable[[str], None]) -> Iterator[tuple[int, Outcome, str]]:
    """(index, decision, the code that decided) of each block in `todo` as it arrives: here
    (in order), by `workers` processes, or on the Dask cluster `runner`. A block whose task
    failed (a worker lost, a deadline passed) is decided `unknown` with the reason."""
    from .results import tool_key

    tool = tool_key()
    if not todo:  # everything taken from the results file: no cluster or pool to start
        return
    if runner is not None:
        from . import cluster

        tasks = [cluster.Task(i, blocks[i].where, jobs[i],
                              cluster.memory_estimate(blocks[i].dim, blocks[i].width,
                                                      blocks[i].gate is not None,
                                                      blocks[i].biased),
                              cluster.time_limit(jobs[i][4], len(jobs[i][3]))) for i in todo]
        for answer in cluster.decide(tasks, _decide_block, runner, say):
            if progress is not None:
                progress(blocks[answer.index])
            value = answer.value if not answer.reason else _failed(
                spec, jobs[answer.index][3], answer.reason)
            yield answer.index, value, answer.tool or tool
        return
    if workers <= 1:
        for i in todo:
            if progress is not None:
                progress(blocks[i])
            yield i, _decide_block(jobs[i]), tool
        return
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(_decide_block, jobs[i]): i for i in todo}
        try:
            for future in as_completed(futures):
                i = futures[future]
                if progress is not None:
                    progress(blocks[i])
                try:
                    value = future.result()
                except Exception as error:  # a worker process lost (BrokenProcessPool)
                    value = _failed(spec, jobs[i][3], f"its worker process failed: "
                                                      f"{type(error).__name__}: {error}")
                yield i, value, tool
        except KeyboardInterrupt:
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def _failed(spec: Spec, lines: tuple[int, ...], reason: str) -> Outcome:
    """A block whose task brought no answer: each of its statements unknown, saying why."""
    from .cluster import unanswered

    return unanswered(spec, [s for s in spec.statements if s.pos.line in lines], reason), \
        False, 0.0


def _spec_error(error: SpecError, checkpoint: Checkpoint) -> str:
    first = error.diagnostics[0]
    return f"{checkpoint.path}: a tensor cannot be read as stated: {first.message}"


def answer(block: FoundBlock, claim: StatementResult | None, query: StatementResult | None,
           seconds: float) -> BlockAnswer:
    absorbable = {"proved": "yes", "refuted": "no"}.get(claim.outcome if claim else "",
                                                         "unknown")
    lo: int | None = None
    hi: int | None = None
    reasons = []
    if query is not None and query.outcome == "decided" and query.min_width is not None:
        lo = hi = query.min_width
    elif query is not None:
        bounds = query.extra.get("min_width_bounds")
        why = query.extra.get("min_width_reason") or query.reason
        if bounds:
            lo, hi = bounds
        elif query.outcome == "decided" and not why:
            lo = hi = None  # decided, no min width: no width absorbs the block (`none`)
        else:
            lo = 1
        if why:
            reasons.append(why if why.startswith("min width") else f"min width: {why}")
    if absorbable == "yes" and (hi is None or hi > block.width):
        hi = block.width
        lo = lo if lo is not None else 1
    if absorbable == "no" and lo is not None and lo <= block.width:
        lo = block.width + 1
    if claim is not None and claim.outcome == "unknown":
        reasons.insert(0, claim.reason)
    method = claim.method if claim is not None and claim.outcome != "unknown" else (
        query.method if query is not None else "")
    return BlockAnswer(block, absorbable, (lo, hi), method, "; ".join(r for r in reasons if r),
                       seconds, claim, query)
