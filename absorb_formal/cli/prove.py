"""`absorb-prove`: decide every claim and query of `.mlp` spec files.

The default command of the table in `absorb_formal.cli`: `main(argv, stdout, stderr) -> int`
is called for every first word that names no other command (`check`, `scan`, `export`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from .. import __version__
from ..api import DEFAULT_TIMEOUT, prove_report
from ..decide.dispatch import ENGINES
from ..language import SpecError
from ..model import memory
from ..model.blocks import Claim, Spec
from ..numeric.attach import Options
from ..numeric.backends import BackendError, backend
from ..numeric.crosscheck import DEFAULT_POINTS, MIN_POINTS, WORK
from ..paths import collect
from ..report import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    FileReport,
    as_json,
    exit_code,
    expectation_code,
    expectation_summary,
    summary,
)
from ..weights.common import ArrayError
from .arguments import add_workers, count, parse, seconds
from .export import HELP as EXPORT_HELP

DESCRIPTION = """\
Decide every claim and query in .mlp spec files: can a residual MLP block
x -> S x + MLP(x) be rewritten as a plain MLP without the skip connection?

PATH is a spec file, or a folder searched recursively for *.mlp files.

  absorb-prove [--json] [--expect] [--certificates DIR [--update]]
               [-j N | --cluster ADDRESS] PATH...
  absorb-prove check [--json] CERTIFICATE_OR_FOLDER...
  absorb-prove scan CHECKPOINT [--json] [--write-spec FILE] [--certificates DIR]
               [--export DIR [--prefer width|accuracy] [--max-error REL]]
               [--activation NAME] [--timeout S] [--memory SIZE]
               [-j N | --cluster ADDRESS] [--results FILE | --no-results]
  absorb-prove export SPEC NAME [--width W] --out FILE.npz|FILE.safetensors|FILE.onnx
               [--dtype float64|float32|bfloat16] [--points N] [--max-error REL]
               [--prefer width|accuracy] [--force] [--engine E] [--timeout S]

From Python: absorb_formal.prove(path_or_text) and absorb_formal.check(path)
(see absorb_formal/api.py).
"""

EPILOG = """\
output:
  one line per claim or query, in file order:
    FILE:LINE: OUTCOME: STATEMENT — VERDICT [METHOD | CERTIFICATE]
  OUTCOME is proved, refuted (the opposite was proved) or unknown for claims,
  decided or unknown for queries; for unknown, VERDICT is the reason. A last
  line summarises the counts. A query on a concrete block says both parts, the
  verdict at the width asked first, then the min width:
    absorbable at width 64 (...); min width 3 | min width between 65 and 80 |
    min width unknown (REASON, e.g. timeout after 5 s)
  (bounds are proved: widths below lo are refuted, hi is absorbable). A timeout
  in the min-width part keeps the first part: the query is still decided.
  Spec errors go to stderr as
    FILE:LINE:COL: error: MESSAGE
  followed by the source line and a caret; nothing else in that file is decided.
  With --json, stdout holds one JSON document instead:
    {"files": [{"path", "results": [{"line", "statement", "kind", "block",
     "outcome", "verdict", "method", "reason", "certificate", "min_width",
     "seconds", ...}], "errors": [{"line", "column", "message"}]}], "exit_code"}
  A concrete query adds "decision": {"width", "absorbable"} (true/false/null at
  that width), "min_width_bounds" ([lo, hi], when only bounds are proved),
  "min_width_reason" (why the min width is not exact) and
  "min_width_certificate"; "crosscheck", "sanity" and "fit" are added by the
  numeric checks. Progress bars go to stderr on a terminal only, never with
  --json.

exit codes:
  0  every claim proved (and every query decided)
  1  some claim refuted
  2  a spec has an error (syntax, undefined name, wrong shape, unreadable file, ...)
  3  no claim refuted, but some claim or query unknown
  4  internal error: a numeric cross-check (or --fit) contradicted an exact
     verdict; the outcome is "error" — a bug in absorb_formal, please report it
  130 interrupted (Ctrl-C): what was decided so far is printed
  When several apply, the first in the order 4, 2, 1, 3 wins.

numeric checks:
  Every absorbable verdict's witness is evaluated against its block at N float64
  points (--crosscheck N, default 100000, 0 = off): Gaussian at scales 1e-3..1e3
  and points on and near every kink hyperplane. The line and the JSON
  ("crosscheck": {points, max_abs_error, max_rel_error, backend, device}) show
  the figures. Refutations of concrete blocks get a float "sanity" figure (the
  size of the violation). --backend torch [--device cuda] runs them with torch.
  --fit adds an adversarial search (gradient descent with restarts) for a plain
  block of the asked width; reaching the tolerance where the prover said "not
  absorbable" is an internal error. Its best error is on the line ("fit width 3:
  best error 0.21 after 8 restarts") and in the JSON ("fit": {width, restarts,
  best_error, tolerance, reached, seconds, stopped}); a fit cut short by
  --timeout keeps the best error reached ("stopped": "timeout after T s").

  With --expect, each outcome is compared with the expectation written on its
  line as a comment, `# expect: proved|refuted|unknown|decided` (default:
  proved for claims, decided for queries); mismatches are listed on stderr and
  the exit code is 0 when every expectation is met, 1 when one is not, 2 for a
  spec error. This is how a corpus states claims that must be refuted.

cluster (the dask extra: pip install 'absorb_formal[dask]'):
  One task per spec file; a worker reads the spec and its loads itself, from the
  same path. -j N > 1 decides on a Dask LocalCluster of N worker processes
  (--no-cluster: a pool of N processes, as without dask); --cluster local:N does
  the same, and --cluster tcp://HOST:PORT uses a running scheduler. Each spec is
  read here first: a spec error is reported without a task, and the task
  declares its largest block's estimate (exact LU of order m + 1, the weights)
  as the MEMORY resource. A worker that dies or a task past its deadline (each
  statement's --timeout plus reading time) makes that file's statements
  unknown with the reason; the run goes on. The output is the same, in order.

certificates:
  --certificates DIR writes one JSON document per claim to DIR/SPEC.LINE.json
  (SPEC relative to the folder given as PATH), deterministically: the same spec
  gives the same bytes. An existing file with other content is left alone and
  reported (exit 2) unless --update is given; writes are atomic.
  `absorb-prove check PATH...` re-verifies certificate documents with the
  independent checker (absorb_formal.checker, which imports nothing from the
  prover) and, where the spec file still exists, that it still says the same.
  One line per document, with the claim's recorded outcome beside validity:
    FILE: valid|invalid|stale|unchecked — claim OUTCOME: STATEMENT (VERDICT)
    [METHOD] — REASON
  (a valid certificate of a refuted claim proves the opposite of STATEMENT).
  `check --json` prints one JSON document; `absorb-prove check --help` lists
  its fields. Exit 0 when none is invalid or stale, 1 when one is, 2 for a
  missing path.

""" + EXPORT_HELP


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="absorb-prove", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", metavar="PATH", help="spec files or folders")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--expect", action="store_true",
                        help="check outcomes against `# expect: OUTCOME` comments (see below)")
    parser.add_argument("--certificates", metavar="DIR", type=Path,
                        help="write one certificate document per claim under DIR")
    parser.add_argument("--update", action="store_true",
                        help="with --certificates: replace documents whose content changed")
    parser.add_argument("--crosscheck", type=count(0), default=DEFAULT_POINTS, metavar="N",
                        help=f"float points per witness (default {DEFAULT_POINTS}; fewer, at least "
                             f"{MIN_POINTS}, for witnesses of over {WORK // DEFAULT_POINTS} "
                             "weights: points x weights <= 2e9; 0 = off)")
    parser.add_argument("--backend", choices=("numpy", "torch"), default="numpy",
                        help="float backend of the numeric checks (default numpy)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="torch device (default auto: cuda when present)")
    parser.add_argument("--fit", action="store_true",
                        help="adversarial gradient search for a plain block (ungated: "
                             "any depth, biases)")
    parser.add_argument("--fit-restarts", type=int, default=8, metavar="K",
                        help="random restarts of --fit (default 8)")
    parser.add_argument("--engine", choices=ENGINES, default="theory",
                        help="theory (docs/rules.md §3-5, with the generic engine as fallback on "
                             "small cases), generic (§6 only), or both (disagreement = error)")
    parser.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT,
                        metavar="SECONDS",
                        help=f"time budget per claim (default {DEFAULT_TIMEOUT:g}; 0 = none); "
                             "a claim that runs out ends unknown")
    add_workers(parser, "files", "the specs")
    parser.add_argument("--no-timing", action="store_true",
                        help='JSON "seconds" as null, so output is byte-identical across runs')
    parser.add_argument("--version", action="version", version=f"absorb-prove {__version__}")
    return parser


def prove_file(path: Path, shown: str, progress_to: TextIO | None,
               options: Options | None = None, timeout: float = 0.0,
               engine: str = "theory") -> FileReport:
    """One spec file, through the API (`absorb_formal.api.prove_report`)."""
    return prove_report(path, shown, engine=engine, timeout=timeout, numeric=options,
                        progress_to=progress_to)


def run_prove(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    reports: list[FileReport] = []
    kept = 0
    try:
        engine = backend(args.backend, args.device)
    except BackendError as error:
        print(f"absorb-prove: error: {error}", file=stderr)
        return EXIT_ERROR
    if args.update and args.certificates is None:
        print("absorb-prove: error: --update needs --certificates DIR (it replaces documents "
              "there)", file=stderr)
        return EXIT_ERROR
    if args.certificates is not None:
        from ..certify import documents as proofs  # only when certificates are asked for

        if problem := proofs.folder_problem(args.certificates):
            print(f"absorb-prove: error: --certificates {args.certificates}: {problem}; "
                  "nothing was decided", file=stderr)
            return EXIT_ERROR
    if args.cluster is not None and args.no_cluster:
        print("absorb-prove: error: --cluster and --no-cluster contradict each other",
              file=stderr)
        return EXIT_ERROR
    runner = None
    if args.cluster is not None or (args.jobs > 1 and not args.no_cluster):
        from ..scanner import cluster
        from ..scanner.found import ScanError

        try:
            runner = cluster.chosen(args.jobs, args.cluster)
        except ScanError as error:
            print(f"absorb-prove: error: {error}", file=stderr)
            return EXIT_ERROR
    shown_to = None if args.json else stderr  # progress bars: a terminal only, never --json
    options = Options(args.crosscheck, engine, args.fit, args.fit_restarts, shown_to)
    items = collect(args.paths, "*.mlp")
    targets: dict[Path, Path] = {}  # certificate file → the spec it certifies, in this run
    try:
        for item, report in zip(items, _reports(items, args, options, runner, stderr), strict=True):
            if report is None:
                assert isinstance(item, str)
                reports.append(FileReport(item.split(": error: ")[0], error=item))
                print(item, file=stderr)
                continue
            assert not isinstance(item, str)
            spec_file, _, relative = item
            reports.append(report)
            if report.interrupted:
                for entry in report.entries if not args.json else ():
                    print(entry.line(report.path), file=stdout)
                raise KeyboardInterrupt
            if args.certificates is not None:
                kept += store(report, spec_file, relative, args.certificates, args.update,
                              stderr, targets)
            if isinstance(report.error, SpecError):
                print(report.error.format(), file=stderr)
            elif not args.json:
                for entry in report.entries:
                    print(entry.line(report.path), file=stdout)
    except KeyboardInterrupt:
        print(summary(reports), file=stdout)
        print("interrupted", file=stderr)
        return EXIT_INTERRUPTED
    except ClusterUnusable as error:  # its scheduler unreachable: before any file is decided
        print(f"absorb-prove: error: {error}", file=stderr)
        return EXIT_ERROR
    code = exit_code(reports)
    if kept:
        print(f"{kept} certificate file(s) differ from what is stored; nothing was overwritten "
              "(use --update to replace them)", file=stderr)
        code = EXIT_ERROR
    if args.expect:
        code = expectation_code(reports)
        for report in reports:
            for entry in report.entries:
                if not entry.as_expected:
                    print(f"{report.path}:{entry.statement.pos.line}: unexpected "
                          f"{entry.result.outcome} (expected {entry.expected}): "
                          f"{entry.statement.statement}", file=stderr)
    if args.json:
        print(as_json(reports, code, with_expectations=args.expect,
                      timing=not args.no_timing), file=stdout)
    else:
        print(summary(reports), file=stdout)
        if args.expect:
            print(expectation_summary(reports), file=stdout)
    return code


def _reports(items: list[tuple[Path, str, str] | str], args: argparse.Namespace,
             options: Options, runner: Any, stderr: TextIO) -> Iterator[FileReport | None]:
    """One report per item, in order; with -j N, files are decided by N worker processes, and
    on a Dask cluster (`runner`) one task per file."""
    settings = (args.crosscheck, args.backend, args.device, args.fit, args.fit_restarts,
                args.timeout, args.engine)
    if runner is not None:
        yield from _on_cluster(items, settings, runner, stderr)
        return
    if args.jobs <= 1:
        for item in items:
            yield None if isinstance(item, str) else prove_file(
                item[0], item[1], options.progress, options, args.timeout, args.engine)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [None if isinstance(item, str) else
                   pool.submit(_prove_in_worker, item[0], item[1], settings) for item in items]
        try:
            for future in futures:
                yield None if future is None else future.result()
        except KeyboardInterrupt:
            pool.shutdown(wait=False, cancel_futures=True)
            raise


class ClusterUnusable(Exception):
    """The Dask cluster asked for cannot be reached or started (exit 2, nothing decided)."""


def _on_cluster(items: list[tuple[Path, str, str] | str], settings: tuple[Any, ...],
                runner: Any, stderr: TextIO, function: Callable[[Any], FileReport] | None = None
                ) -> Iterator[FileReport | None]:
    """The reports of `items` decided on the cluster `runner`, in order as they become ready.
    Each spec is read here first, for its memory estimate (the largest block's exact LU and
    weights) and its deadline; a spec error is reported without a task. A task that brings
    no answer (a worker lost, its deadline passed) makes each statement of its file unknown,
    with the reason. `function`: what a task runs on its job (default `_prove_job`)."""
    from ..language import load_file
    from ..scanner import cluster
    from ..scanner.found import ScanError

    ready: dict[int, FileReport | None] = {}
    specs: dict[int, Spec] = {}
    tasks = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            ready[i] = None
            continue
        path, shown, _ = item
        try:
            spec = specs[i] = load_file(path, shown, hold=False)  # decided elsewhere
        except SpecError as error:
            ready[i] = FileReport(shown, error=error)
            continue
        memory = max([cluster.memory_estimate(b.dim, b.width, b.activation.gated, b.biased,
                                              b.depth)
                      for b in spec.blocks.values() if b.is_concrete],
                     default=cluster.BASE_BYTES)
        tasks.append(cluster.Task(i, shown, (str(path.absolute()), shown, settings), memory,
                                  cluster.time_limit(settings[5], len(spec.statements))))
    following = 0
    answers = cluster.decide(tasks, function or _prove_job, runner,
                             lambda line: print(line, file=stderr, flush=True)) if tasks else ()
    try:
        for answer in answers:
            spec = specs[answer.index]
            ready[answer.index] = answer.value if not answer.reason else FileReport(
                spec.path, cluster.unanswered(spec, spec.statements, answer.reason),
                spec=spec)
            while following in ready:
                yield ready.pop(following)
                following += 1
    except ScanError as error:  # the cluster could not be reached or started
        raise ClusterUnusable(str(error)) from None
    while following in ready:
        yield ready.pop(following)
        following += 1


def _prove_job(job: tuple[str, str, tuple[Any, ...]]) -> FileReport:
    """A cluster task's work: one spec file, decided in a worker's deciding process."""
    return _prove_in_worker(Path(job[0]), job[1], job[2])


def _prove_in_worker(path: Path, shown: str, settings: tuple[Any, ...]) -> FileReport:
    points, backend_name, device, fit, restarts, timeout, engine = settings
    options = Options(points, backend(backend_name, device), fit, restarts, None)
    return prove_file(path, shown, None, options, timeout, engine)


def store(report: FileReport, spec_file: Path, relative: str, folder: Path, update: bool,
          stderr: TextIO, targets: dict[Path, Path]) -> int:
    """Write the report's claim certificates; return how many differ (or collide with another
    spec's certificate in this run) and were kept."""
    if report.spec is None:
        return 0
    from ..certify import documents as proofs  # only when certificates are asked for

    kept = 0
    for entry in report.entries:
        if not isinstance(entry.statement, Claim):
            continue
        target = folder / proofs.file_name(relative, entry.statement.pos.line)
        other = targets.setdefault(target.resolve(), spec_file.resolve())
        if other != spec_file.resolve():
            print(f"{target}: also the certificate name of {other}; not written (give the "
                  "two specs in separate runs or folders)", file=stderr)
            kept += 1
            continue
        try:
            doc = proofs.document(report.spec, entry.statement, entry.exact or entry.result,
                                  spec_file, target)
        except ArrayError as error:  # a tensor read again (a cluster run) that has changed
            print(f"{target}: not written: {error}", file=stderr)
            kept += 1
            continue
        try:
            written = proofs.write(target, proofs.encode(doc), update)
        except OSError as error:
            print(f"{target}: cannot write: {error.strerror or error}", file=stderr)
            kept += 1
            continue
        if written == "differs":
            print(f"{target}: differs from the new certificate; kept", file=stderr)
            kept += 1
    return kept


def main(argv: list[str], stdout: TextIO, stderr: TextIO) -> int:
    """`absorb-prove [options] PATH...`: decide the specs; the exit code (never raises for bad
    input). The command table (`absorb_formal.cli.main`) calls it for every first word that
    names no other command."""
    args = parse(build_parser(), argv, stdout, stderr)
    if isinstance(args, int):
        return args
    memory.set_limit(args.memory)
    return run_prove(args, stdout, stderr)
