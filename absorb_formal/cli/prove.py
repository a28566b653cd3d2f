"""`absorb-prove`: decide every claim and query of `.mlp` spec files.

`main(argv, stdout, stderr) -> int` runs in-process (tests call it directly); `entry()` is
the console script.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from .. import __version__
from ..api import DEFAULT_TIMEOUT, prove_report
from ..certify import documents as proofs
from ..decide import budget
from ..decide.dispatch import ENGINES
from ..language import SpecError
from ..model.blocks import Claim
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
from .arguments import count, nonnegative, parse, seconds, size

DESCRIPTION = """\
Decide every claim and query in .mlp spec files: can a residual MLP block
x -> S x + MLP(x) be rewritten as a plain MLP without the skip connection?

PATH is a spec file, or a folder searched recursively for *.mlp files.

  absorb-prove [--json] [--expect] [--certificates DIR [--update]] PATH...
  absorb-prove check [--json] CERTIFICATE_OR_FOLDER...
  absorb-prove scan CHECKPOINT [--json] [--write-spec FILE] [--certificates DIR]
               [--export DIR [--prefer width|accuracy] [--max-error REL]]
               [--activation NAME] [--timeout S] [-j N]
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

export:
  `absorb-prove export SPEC NAME --out FILE` decides block NAME of SPEC at --width W
  (default: its minimal width; when only bounds lo..hi of it are proved, as `query`
  finds them, hi, the least width proved absorbable, and the output and the file's
  width_note say so) and writes the exact witness, the plain block (skip none)
  proved equal to it, as arrays named like the language's fields: up, down, gate,
  up_bias, gate_bias, down_bias (biases 1-D, only those that exist); a stack of depth L
  uses layer1.up ... layerL.down. Each exact weight is rounded to nearest (ties to even)
  in --dtype (default float64; bfloat16 needs .safetensors or .onnx). The file records
  (safetensors __metadata__, the JSON string array __absorb_formal__ of a .npz, or an
  .onnx's metadata_props): spec_sha256,
  certificate_sha256 (of the certificate object of `NAME is absorbable at width W`, in
  the canonical bytes --certificates writes), width (W: a narrower witness is padded
  with zero neurons), construction, dtype, max_rounding_rel_error
  (largest |rounded - exact| / |exact| over the entries), the errors against the
  block's output over N seeded standard-normal rows (--points: default 10000, fewer (at
  least 100) when N x weights would pass 2e9): sample_max_rel_error (largest
  |exported - block| over the median largest |block|, both in float64),
  sample_max_rel_error_in_dtype_arith (exported computed in the dtype's arithmetic) and
  sample_original_rel_error_in_dtype_arith (the block computed there), and
  weight_max_abs_before / _after. A sample_max_rel_error beyond --max-error (default 16
  machine epsilons of the dtype, recorded as sample_max_error_allowed) writes nothing.
  Large blocks with two exact constructions (doubles at m + d, spare pairs at m + 2d):
  without --width, --prefer width (default) takes the narrowest within --max-error,
  --prefer accuracy the least error in the dtype's arithmetic; a width other than the
  proved one is said on stdout and in width_note. stdout: a summary (with these figures)
  and a .mlp block that loads the file back. An existing FILE is never replaced without
  --force. A witness whose arrays are estimated beyond --memory SIZE (300MB, 4GB,
  1.5GiB; default: the memory available now) is refused before anything is allocated.
  Exit 0 written; 1 the block is not absorbable at W (or at any width); 2 an error (no
  such block, a family, undecided, bad --out, --dtype or --memory, FILE exists, sample
  error beyond --max-error, beyond --memory, spec error).
"""


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
    parser.add_argument("-j", "--jobs", type=count(1), default=1, metavar="N",
                        help="decide N files in parallel (output order is unchanged)")
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
    if args.certificates is not None and (problem := proofs.folder_problem(args.certificates)):
        print(f"absorb-prove: error: --certificates {args.certificates}: {problem}; nothing "
              "was decided", file=stderr)
        return EXIT_ERROR
    shown_to = None if args.json else stderr  # progress bars: a terminal only, never --json
    options = Options(args.crosscheck, engine, args.fit, args.fit_restarts, shown_to)
    items = collect(args.paths, "*.mlp")
    targets: dict[Path, Path] = {}  # certificate file → the spec it certifies, in this run
    try:
        for item, report in zip(items, _reports(items, args, options, stderr), strict=True):
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
             options: Options, stderr: TextIO) -> Iterator[FileReport | None]:
    """One report per item, in order; with -j N, files are decided by N worker processes."""
    if args.jobs <= 1:
        for item in items:
            yield None if isinstance(item, str) else prove_file(
                item[0], item[1], options.progress, options, args.timeout, args.engine)
        return
    from concurrent.futures import ProcessPoolExecutor

    settings = (args.crosscheck, args.backend, args.device, args.fit, args.fit_restarts,
                args.timeout, args.engine)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [None if isinstance(item, str) else
                   pool.submit(_prove_in_worker, item[0], item[1], settings) for item in items]
        try:
            for future in futures:
                yield None if future is None else future.result()
        except KeyboardInterrupt:
            pool.shutdown(wait=False, cancel_futures=True)
            raise


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
        doc = proofs.document(report.spec, entry.statement, entry.exact or entry.result,
                              spec_file, target)
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


def main(argv: list[str] | None = None, stdout: TextIO | None = None,
         stderr: TextIO | None = None) -> int:
    """Run `absorb-prove` with `argv`; return the exit code (never raises for bad input)."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["check"]:
        from .check import main as check_main

        return check_main(argv[1:], stdout, stderr)
    if argv[:1] == ["scan"]:
        from .scan import main as scan_main

        return scan_main(argv[1:], stdout, stderr)
    if argv[:1] == ["export"]:
        exported = parse(build_export_parser(), argv[1:], stdout, stderr)
        return exported if isinstance(exported, int) else run_export(exported, stdout, stderr)
    args = parse(build_parser(), argv, stdout, stderr)
    return args if isinstance(args, int) else run_prove(args, stdout, stderr)


def build_export_parser() -> argparse.ArgumentParser:
    from ..export import witness as export

    parser = argparse.ArgumentParser(
        prog="absorb-prove export", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Write the exact witness (the plain block, skip none) of an absorbable "
                    "block as weight arrays.",
        epilog=EPILOG[EPILOG.index("export:"):])
    parser.add_argument("spec", metavar="SPEC", help="the .mlp spec file")
    parser.add_argument("name", metavar="NAME", help="the block to export")
    parser.add_argument("--width", type=int, metavar="W",
                        help="hidden width of the witness (default: the minimal width, or the "
                             "least width proved absorbable when only bounds are proved)")
    parser.add_argument("--out", required=True, type=Path, metavar="FILE",
                        help="FILE.npz, FILE.safetensors or FILE.onnx (never replaced without "
                             "--force)")
    parser.add_argument("--dtype", choices=export.DTYPES, default="float64",
                        help="float format of the arrays (default float64)")
    parser.add_argument("--points", type=int, metavar="N",
                        help=f"sample points of the float error figure (default "
                             f"{export.DEFAULT_POINTS}, fewer for blocks of over "
                             f"{WORK // export.DEFAULT_POINTS} weights; 0 = off)")
    parser.add_argument("--max-error", type=nonnegative, metavar="REL",
                        help="largest sample relative error written (default 16 machine "
                             "epsilons of --dtype: " + ", ".join(
                                 f"{d} {export.default_max_error(d):.3g}" for d in export.DTYPES)
                             + "); beyond it nothing is written, exit 2")
    parser.add_argument("--prefer", choices=export.PREFER, default="width",
                        help="when several exact constructions exist (doubles at m + d, spare "
                             "pairs at m + 2d): the narrowest that passes --max-error "
                             "(width, default) or the least error in the dtype (accuracy)")
    parser.add_argument("--force", action="store_true", help="replace an existing FILE")
    parser.add_argument("--engine", choices=ENGINES, default="theory",
                        help="as for deciding (default theory)")
    parser.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT,
                        metavar="SECONDS",
                        help=f"time budget of the decision (default {DEFAULT_TIMEOUT:g}; 0 = none)")
    parser.add_argument("--memory", type=size, metavar="SIZE",
                        help="the most memory the export may hold (the whole process), e.g. "
                             "300MB, 4GB, 1.5GiB (default: the memory available now); a "
                             "witness whose arrays are estimated beyond it is refused before "
                             "anything is allocated, exit 2")
    return parser


def run_export(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from ..export import witness as export

    if args.points == 0 and args.max_error is not None:
        print("absorb-prove export: error: --max-error needs the sample (--points 0 turns it "
              "off)", file=stderr)
        return EXIT_ERROR

    try:
        with budget.limit(args.timeout):
            record = export.export(args.spec, args.name, args.out, args.width, args.dtype,
                                   args.force, args.points, args.engine, args.max_error,
                                   args.prefer, args.memory)
    except export.ExportError as error:
        print(f"absorb-prove export: error: {error}", file=stderr)
        return error.code
    except SpecError as error:
        print(error.format(), file=stderr)
        return EXIT_ERROR
    except budget.ClaimTimeout:
        print(f"absorb-prove export: error: no decision within {args.timeout:g} s "
              "(--timeout)", file=stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("interrupted; nothing written", file=stderr)
        return EXIT_INTERRUPTED
    print(f"{args.out}: {record['statement']} [{record['method']}]; {record['dtype']}, "
          f"hidden width {record['width']}, arrays {record['arrays'].replace(',', ', ')}",
          file=stdout)
    if "width_note" in record:
        print(f"  {record['width_note']}; --width W exports at another", file=stdout)
    for line in export.summary(record):
        print(f"  {line}", file=stdout)
    print(f"  certificate sha256 {record['certificate_sha256']}", file=stdout)
    print(f"# a spec beside {args.out.name} loads it back with:", file=stdout)
    print(export.load_snippet(record, args.out.name), file=stdout)
    return 0


def entry() -> None:
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # `absorb-prove ... | head`: the reader left; not an error of ours
        # Python flushes stdout again at exit: point it at devnull so that raises nothing.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)
