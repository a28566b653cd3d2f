"""`absorb-prove scan PATH`: the command line of `absorb_formal.scan` (`scanner.run.scan`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TextIO

from ..api import DEFAULT_TIMEOUT
from ..certify import documents as proofs
from ..decide import progress as bars
from ..model import memory
from ..model.blocks import Claim
from ..scanner.cluster import problem as cluster_problem
from ..scanner.find import needs_copies, open_checkpoint
from ..scanner.found import ScanError
from ..scanner.results import DEFAULT_NAME
from ..scanner.results import default_file as default_results
from ..scanner.results import problem as results_problem
from ..scanner.run import BlockAnswer, ScanReport, scan, with_expectations
from ..weights.common import ArrayError
from .arguments import add_workers, nonnegative, parse, seconds

EXIT_OK, EXIT_NOT, EXIT_ERROR, EXIT_UNKNOWN, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

DESCRIPTION = """\
Find every MLP sublayer of a checkpoint and decide, for each, whether its residual
x -> x + MLP(x) can be absorbed into a plain MLP: at the block's own width, and at which
minimal width. The tensors are read exactly, by the same prover as `absorb-prove SPEC`.

PATH is one of:
  a folder with config.json and model.safetensors (or sharded weights with
    model.safetensors.index.json, or .safetensors / .npz files);
  a .safetensors or .npz file (config.json beside it is read when present);
  an .onnx file (needs the onnx extra; found by graph pattern);
  a PyTorch pickle (.bin/.pt/.pth, alone or in a folder; needs torch, loaded with
    weights_only=True): its tensors are copied bit for bit into a new .safetensors
    beside the --write-spec FILE (else a temporary folder), which is then read.

MLP sublayers are found by the naming conventions of GPT-2 (Conv1D, input x output),
GPT-J, GPT-NeoX, BERT/RoBERTa/ViT, OPT/Phi, T5 (plain and gated), LLaMA/Mistral/Qwen/
Gemma and Mixtral experts; attention, norms and embeddings are passed over and listed.
The activation comes from config.json (hidden_activation, hidden_act,
activation_function, dense_act_fn, feed_forward_proj): gelu_new and gelu_pytorch_tanh
are gelu_tanh, gelu the exact erf gelu, silu in a gated block swiglu. In an ONNX model
it is read from the graph. --activation NAME (a Hugging Face name or any activation of the
language) names it where config.json does not; one that contradicts config.json or the
graph is refused (exit 2) unless --force-activation is given too, since the answer would
then be about another function than the model computes.
"""

EPILOG = """\
output:
  Each row answers for the sublayer the model computes: with its norm where config.json's
  model_type (or the ONNX graph) places one, pre-norm x + F(N(x)), post-norm N(x + F(x))
  or sandwich x + N2(F(N(x))) (docs/rules.md, normalised sublayers); and beside it for the
  bare block x + F(x), the paper's question.
  A table, one row per sublayer: NAME (its module path), ACTIVATION, DIM, WIDTH, BIAS,
  NORM (pre LN, post LN, pre RMS, sandwich RMS+RMS, - for none, ? when its place is not
  known), ABSORBABLE at its own width (yes / no / unknown), MIN WIDTH (N when exact, LO..HI
  for proved bounds, LO.. when no width is known to work, none when no width works),
  METHOD, BARE and BARE MIN (the same two answers for the bare block) and the seconds it
  took; then the reasons for what is unknown, what was skipped and why, and a summary
  line. A progress bar goes to stderr on a terminal.
  With --json, stdout holds one JSON document instead:
    {"path", "blocks": [{"name", "where", "activation", "dim", "width", "bias",
     "absorbable": "yes"|"no"|"unknown", "min_width": [lo, hi], "method", "reason",
     "seconds", "notes", "norm": {"kind", "placement", "eps"},
     "any_width": "yes"|"no"|"unknown",
     "bare": {"question", "absorbable", "min_width", "any_width", "method", "reason"}}],
     "skipped": [{"where", "why"}], "results": {"file", "reused", "stored"} or null,
     "spec", "certificates", "export", "error" (only when a file asked for was not
     written: why), "exit_code"}
  norm: kind layernorm or rmsnorm, placement pre, post, sandwich or unknown, eps the
  exact decimal (all null when no norm sits beside the MLP).
  The fields before "norm" describe the sublayer. min_width: lo = hi when exact; hi null
  when no upper bound is known; [null, null] when no width absorbs it (proved). any_width:
  is it absorbable at some width. "name" is the block's name in the spec; the bare block
  is NAME_bare there when a norm sits beside it.
  On stderr, whatever the format: the cluster used, the results file's sublayers taken
  ("results: FILE: K of N sublayer(s) already decided there, not decided again"), and why
  a results file or a worker's resources are not used.

cluster (the dask extra: pip install 'absorb_formal[dask]'):
  One task per sublayer; a worker reads the tensors itself from the checkpoint's path.
  --cluster local:N starts N worker processes here, each declaring MEMORY (its share of
  the memory available); -j N > 1 does the same when dask is installed (--no-cluster: a
  pool of N processes, as without dask). --cluster tcp://HOST:PORT uses a running
  scheduler; workers that declare no MEMORY resource get the tasks without their memory
  estimates (said on stderr). A task declares its estimate (exact LU of order m + 1, the
  weights) as MEMORY. A worker that dies, a deciding process killed, a task past its
  deadline (each question's --timeout plus reading time) or a lost scheduler make that
  sublayer unknown with the reason; the scan goes on.

files:
  --write-spec FILE  the spec that was decided: one block per sublayer loading its
                     tensors from the checkpoint (paths relative to FILE), with its norm
                     clause, and the bare block NAME_bare, each with `claim NAME is
                     absorbable` and `query NAME`, each with its outcome as `# expect:`,
                     so `absorb-prove --expect FILE` reproduces the answers. Never
                     replaces an existing FILE (exit 2).
  --certificates DIR one certificate document per claim (as `absorb-prove
                     --certificates`); needs --write-spec (the documents cite the spec).
  --export DIR       the skip-free checkpoint: each sublayer replaced by a plain MLP,
                     proved equal to x + MLP(x), at its least proved width (all padded
                     to the largest, with zero neurons); tensor names and layout as in
                     the input, other tensors unchanged, config.json's width keys updated
                     and an "absorb_formal" entry saying which sublayers lost their skip,
                     with each one's construction, errors against its output and weight
                     growth (also printed). A proved width whose construction misses the
                     error gate (--max-error, default 16 machine epsilons of the dtype, of
                     the output) gives way to a wider one, said on screen; --prefer
                     accuracy takes the most accurate. Refused when some sublayer has no
                     proved width, or none within the gate. DIR must not exist or be empty.
                     A post-norm sublayer N(x + F(x)) becomes N(P(x)): the plain P
                     replaces the FFN and the norm stays. A pre-norm or sandwich sublayer
                     has no skip-free form (docs/rules.md §10.2): export is refused with
                     that reason.
                     An ONNX model is written as DIR/model.onnx: the same graph with each
                     sublayer's weight tensors holding its witness (own width, own
                     layout and data type) and its residual Add removed, what read the
                     sum reading the MLP's output; the record is in metadata_props
                     ("absorb_formal"). With onnxruntime installed both models are run
                     on seeded random inputs and the largest relative output difference
                     is recorded (beyond √ε of the weights' format, which float arithmetic
                     does not explain: nothing written). Refused before
                     the scan, naming the tensor: weights shared with other nodes, MLP
                     values read outside it, no residual Add, MLP tensors in external
                     data or not FLOAT/DOUBLE/BFLOAT16.
  --results FILE     an SQLite file that keeps each sublayer as its answer arrives (one
                     transaction each; only sublayers whose every statement was decided,
                     no unknown) and from which a rerun takes them, keyed by the SHA-256
                     of the tensors each loads, its question and the tool's code: a scan
                     killed part-way resumes, writing the same JSON, spec and
                     certificates. Default: .absorb-results.sqlite in the --certificates
                     folder, else beside --write-spec, else here (--no-results: none). A
                     FILE that is not such a database is never changed: refused (exit 2)
                     when named, passed over (said) at the default place.
  --export-bare      with --export: write the bare blocks' witnesses instead (x + F(x),
                     the paper's question). For a pre-norm model they are NOT drop-in
                     replacements; config.json's record (an ONNX model's metadata) says
                     so.

exit codes:
  0  every sublayer (as the model computes it) decided at its own width (yes or no)
  1  (not used: a "no" is an answer, not a failure)
  2  an error: unreadable checkpoint, unknown activation, a tensor of the wrong shape,
     FILE or DIR exists, --export impossible, no MLP sublayer found (nothing written),
     --cluster without dask or its scheduler unreachable, --results FILE not ours
  3  some sublayer unknown at its own width
  130 interrupted
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="absorb-prove scan", description=DESCRIPTION,
                                     epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", type=Path, metavar="PATH", help="checkpoint folder or file")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--write-spec", type=Path, metavar="FILE",
                        help="write the decided spec to FILE")
    parser.add_argument("--certificates", type=Path, metavar="DIR",
                        help="write certificate documents (needs --write-spec)")
    parser.add_argument("--export", type=Path, metavar="DIR",
                        help="write the skip-free checkpoint to DIR")
    parser.add_argument("--export-bare", action="store_true",
                        help="with --export: write the bare blocks' witnesses (x + F(x)) "
                             "where the model computes a pre-norm sublayer; NOT a drop-in "
                             "replacement, and the record says so")
    parser.add_argument("--prefer", choices=("width", "accuracy"), default="width",
                        help="--export: when several exact constructions exist, the narrowest "
                             "within the error gate (width, default) or the least error in "
                             "the checkpoint's dtype (accuracy)")
    parser.add_argument("--max-error", type=nonnegative, metavar="REL",
                        help="--export: the error gate, against each sublayer's output "
                             "(default 16 machine epsilons of its dtype)")
    parser.add_argument("--activation", metavar="NAME",
                        help="the activation, where config.json names none; one that "
                             "contradicts config.json or the ONNX graph needs "
                             "--force-activation")
    parser.add_argument("--force-activation", action="store_true",
                        help="decide --activation even where it contradicts the activation "
                             "config.json names or the ONNX graph computes")
    parser.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT, metavar="S",
                        help=f"seconds per question (default {DEFAULT_TIMEOUT:g}; 0 = none)")
    add_workers(parser, "sublayers", "the checkpoint")
    parser.add_argument("--results", type=Path, metavar="FILE",
                        help="the SQLite file where each decided sublayer is kept as it "
                             f"arrives and taken from by later scans (default: "
                             f"{DEFAULT_NAME} in the --certificates folder, else beside "
                             "--write-spec, else in the working directory)")
    parser.add_argument("--no-results", action="store_true",
                        help="keep no results file, and take nothing from one")
    return parser


def main(argv: list[str], stdout: TextIO, stderr: TextIO) -> int:
    args = parse(build_parser(), argv, stdout, stderr)
    if isinstance(args, int):
        return args
    memory.set_limit(args.memory)
    problem = _refusal(args) or _unexportable(args)
    if problem:
        print(f"absorb-prove scan: error: {problem}", file=stderr)
        return EXIT_ERROR
    shown = None if args.json else stderr
    bar = bars.bar("scan", "block", stream=shown, delay=0.0)

    def tick(block: object) -> None:
        if bar is not None:
            bar.set_postfix_str(getattr(block, "where", ""))
            bar.update()

    if args.write_spec is not None:
        args.write_spec.parent.mkdir(parents=True, exist_ok=True)  # its loads are relative
    try:
        report = scan(args.path, activation=args.activation, timeout=args.timeout,
                      spec_file=args.write_spec, progress=tick, workers=args.jobs,
                      force_activation=args.force_activation,
                      cluster=False if args.no_cluster else args.cluster,
                      results=_results_file(args), notify=lambda line: print(line, file=stderr))
    except ScanError as error:
        print(f"absorb-prove scan: error: {error}", file=stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=stderr)
        return EXIT_INTERRUPTED
    finally:
        if bar is not None:
            bar.close()
    files: dict[str, object] = {}
    said: list[str] = []  # the export's lines: on screen, not only in config.json
    code = EXIT_INTERRUPTED if report.interrupted else _code(report.blocks)
    if not report.blocks and not report.interrupted:  # nothing decided: nothing to write
        print(f"absorb-prove scan: error: {args.path}: no MLP sublayer found (what was "
              "skipped, and why, is listed on stdout)", file=stderr)
        code = EXIT_ERROR
    failed = ""  # why a file asked for was not written (also in --json's "error")
    try:
        if code != EXIT_ERROR:
            files.update(_write_files(report, args, said))
    except (ScanError, ArrayError) as error:  # ArrayError: a tensor changed since it was read
        failed = str(error)
    except OSError as error:  # a folder that refuses the files: said, never a traceback
        failed = f"{error.filename or ''}: cannot write: {error.strerror or error}"
    if failed:
        print(f"absorb-prove scan: error: {failed}", file=stderr)
        code = EXIT_ERROR
    if args.json:
        print(json.dumps({**report.as_json(), **{k: files.get(k) for k in
                                                 ("spec", "certificates", "export")},
                          **({"error": failed} if failed else {}),
                          "exit_code": code}, indent=2), file=stdout)
        for line in said:  # beside the one JSON document on stdout
            print(line, file=stderr)
    else:
        print(table(report), file=stdout)
        for key, value in files.items():
            print(f"{key}: {value}", file=stdout)
        for line in said:
            print(line, file=stdout)
    return code


def _write_files(report: ScanReport, args: argparse.Namespace, lines: list[str]
                 ) -> dict[str, object]:
    """The spec, certificates and skip-free checkpoint asked for (paths by key); `lines`
    receives what the export says about each sublayer (`export_checkpoint`)."""
    files: dict[str, object] = {}
    if args.write_spec is not None and report.report is not None:
        files["spec"] = str(_write_spec(report, args.write_spec))
        if args.certificates is not None:
            files["certificates"] = _store(report, args.write_spec, args.certificates)
    if args.export is not None:
        from ..export.checkpoint import export_checkpoint

        files["export"] = str(export_checkpoint(report, args.export, args.prefer,
                                                args.max_error, lines,
                                                bare=args.export_bare))
    return files


def _refusal(args: argparse.Namespace) -> str:
    if args.force_activation and args.activation is None:
        return "--force-activation needs --activation NAME (the activation to decide)"
    if args.certificates is not None and args.write_spec is None:
        return "--certificates needs --write-spec FILE (the documents cite the spec)"
    if args.certificates is not None and (problem := proofs.folder_problem(args.certificates)):
        return f"--certificates {args.certificates}: {problem}"
    if args.write_spec is not None:
        if args.write_spec.is_dir():
            return f"--write-spec {args.write_spec}: a folder; give a file name ending in .mlp"
        if args.write_spec.exists():
            return f"{args.write_spec} exists; scan never replaces a file (remove it first)"
        if args.write_spec.suffix != ".mlp":
            return f"--write-spec {args.write_spec}: a spec file ends in .mlp"
        if problem := proofs.folder_problem(args.write_spec.parent):
            return f"--write-spec {args.write_spec}: {problem}"
    if args.export_bare and args.export is None:
        return "--export-bare needs --export DIR"
    if args.export is not None and args.export.exists() and (
            not args.export.is_dir() or any(args.export.iterdir())):
        return f"--export {args.export}: exists and is not an empty folder"
    if args.timeout < 0:
        return "--timeout must be >= 0"
    return _cluster_refusal(args)


def _cluster_refusal(args: argparse.Namespace) -> str:
    if args.cluster is not None and args.no_cluster:
        return "--cluster and --no-cluster contradict each other"
    if args.cluster is not None and (problem := cluster_problem(args.cluster)):
        return f"--cluster {problem}"
    if args.results is not None and args.no_results:
        return "--results and --no-results contradict each other"
    if args.results is not None and (problem := results_problem(args.results)):
        return f"--results {problem}; nothing was decided"
    return ""


def _results_file(args: argparse.Namespace) -> Path | None:
    if args.no_results:
        return None
    return args.results or default_results(args.certificates, args.write_spec)


def _unexportable(args: argparse.Namespace) -> str:
    """Why --export cannot be written for this checkpoint, said before anything is decided
    (a scan can take hours)."""
    if args.export is None or needs_copies(args.path):  # a pickle is copied to safetensors
        return ""
    from ..export.checkpoint import unexportable

    try:
        checkpoint = open_checkpoint(args.path)
    except ScanError as error:
        return str(error)
    return unexportable(checkpoint.kind, checkpoint.path, args.export_bare)


def _code(blocks: list[BlockAnswer]) -> int:
    return EXIT_UNKNOWN if any(b.absorbable == "unknown" for b in blocks) else EXIT_OK


def _write_spec(report: ScanReport, target: Path) -> Path:
    assert report.report is not None
    lines = report.spec_text.rstrip("\n").split("\n")
    text = with_expectations(lines, report.report)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "x", encoding="utf-8") as stream:  # never replaces a file
        stream.write(text)
    return target


def _store(report: ScanReport, spec_file: Path, folder: Path) -> int:
    """Certificate documents for the claims, as `absorb-prove --certificates` writes them."""
    assert report.report is not None and report.report.spec is not None
    written = 0
    for entry in report.report.entries:
        if not isinstance(entry.statement, Claim):
            continue
        target = folder / proofs.file_name(spec_file.name, entry.statement.pos.line)
        doc = proofs.document(report.report.spec, entry.statement, entry.exact or entry.result,
                              spec_file, target)
        if proofs.write(target, proofs.encode(doc), update=False) == "differs":
            raise ScanError(f"{target}: exists with other content; not replaced")
        written += 1
    return written


def _norm(answer: BlockAnswer) -> str:
    norm = answer.block.norm
    if norm is None:
        return "-"
    if norm.placement == "unknown":
        return "?"
    if not norm.known:  # placed, but its ε is missing
        return f"{norm.placement} {norm.kind}?"
    short = {"layernorm": "LN", "rmsnorm": "RMS"}
    second = f"+{short[norm.second.kind]}" if norm.second is not None else ""
    return f"{norm.placement} {short.get(norm.kind, norm.kind)}{second}"


def _width(answer: BlockAnswer) -> str:
    lo, hi = answer.min_width
    if lo is None and hi is None:
        return "none"
    if hi is None:
        return f"{lo}.."
    return str(lo) if lo == hi else f"{lo}..{hi}"


def table(report: ScanReport) -> str:
    head = ("NAME", "ACTIVATION", "DIM", "WIDTH", "BIAS", "NORM", "ABSORBABLE", "MIN WIDTH",
            "METHOD", "BARE", "BARE MIN", "SECONDS")
    rows = [(a.block.where, a.block.activation, str(a.block.dim), str(a.block.width),
             "yes" if a.block.biased else "no", _norm(a), a.absorbable, _width(a),
             a.method or "-", (a.bare or a).absorbable, _width(a.bare or a),
             f"{a.seconds:.1f}") for a in report.blocks]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
           for row in ([head, *rows] if rows else [])]  # no sublayer: no empty table
    for answer in report.blocks:
        if answer.reason:
            out.append(f"  {answer.block.where}: {answer.reason}")
        if answer.bare is not None and answer.bare.reason:
            out.append(f"  {answer.block.where} (bare block): {answer.bare.reason}")
        out += [f"  {answer.block.where}: {note}" for note in answer.block.notes
                if note.startswith("--force-activation")]
    if any(a.normalised for a in report.blocks):
        out.append("NORM: where the norm sits (pre: x + F(N(x)), post: N(x + F(x)), sandwich: "
                   "x + N2(F(N(x))));\n  ABSORBABLE and MIN WIDTH answer for that sublayer; "
                   "BARE and BARE MIN for the bare block x + F(x), the paper's question")
    for skipped in report.skipped:
        out.append(f"skipped: {skipped.where}: {skipped.why}")
    counts = {k: sum(a.absorbable == k for a in report.blocks) for k in ("yes", "no", "unknown")}
    out.append(f"scan: {len(report.blocks)} MLP sublayer(s): {counts['yes']} absorbable, "
               f"{counts['no']} not absorbable, {counts['unknown']} unknown at their own width"
               + ("; interrupted" if report.interrupted else ""))
    return "\n".join(out)
