"""`absorb-prove export SPEC NAME --out FILE`: write the exact witness of an absorbable block
as weight arrays, through `absorb_formal.export.export`.

`HELP` is this command's section of `absorb-prove --help` too. The API is imported when the
command runs, not when the help text is read.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ..report import EXIT_ERROR, EXIT_INTERRUPTED
from .arguments import nonnegative, parse, seconds, size

HELP = """\
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


def main(argv: list[str], stdout: TextIO, stderr: TextIO) -> int:
    args = parse(build_parser(), argv, stdout, stderr)
    return args if isinstance(args, int) else run(args, stdout, stderr)


def build_parser() -> argparse.ArgumentParser:
    from ..api import DEFAULT_TIMEOUT
    from ..decide.dispatch import ENGINES
    from ..export.sample import DEFAULT_POINTS, default_max_error
    from ..export.witness import DTYPES, PREFER
    from ..numeric.crosscheck import WORK

    parser = argparse.ArgumentParser(
        prog="absorb-prove export", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Write the exact witness (the plain block, skip none) of an absorbable "
                    "block as weight arrays.",
        epilog=HELP)
    parser.add_argument("spec", metavar="SPEC", help="the .mlp spec file")
    parser.add_argument("name", metavar="NAME", help="the block to export")
    parser.add_argument("--width", type=int, metavar="W",
                        help="hidden width of the witness (default: the minimal width, or the "
                             "least width proved absorbable when only bounds are proved)")
    parser.add_argument("--out", required=True, type=Path, metavar="FILE",
                        help="FILE.npz, FILE.safetensors or FILE.onnx (never replaced without "
                             "--force)")
    parser.add_argument("--dtype", choices=DTYPES, default="float64",
                        help="float format of the arrays (default float64)")
    parser.add_argument("--points", type=int, metavar="N",
                        help=f"sample points of the float error figure (default "
                             f"{DEFAULT_POINTS}, fewer for blocks of over "
                             f"{WORK // DEFAULT_POINTS} weights; 0 = off)")
    parser.add_argument("--max-error", type=nonnegative, metavar="REL",
                        help="largest sample relative error written (default 16 machine "
                             "epsilons of --dtype: " + ", ".join(
                                 f"{d} {default_max_error(d):.3g}" for d in DTYPES)
                             + "); beyond it nothing is written, exit 2")
    parser.add_argument("--prefer", choices=PREFER, default="width",
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


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from ..decide import budget
    from ..export.record import load_snippet, summary
    from ..export.rounding import ExportError
    from ..export.witness import export
    from ..language import SpecError

    if args.points == 0 and args.max_error is not None:
        print("absorb-prove export: error: --max-error needs the sample (--points 0 turns it "
              "off)", file=stderr)
        return EXIT_ERROR

    try:
        with budget.limit(args.timeout):
            record = export(args.spec, args.name, args.out, args.width, args.dtype, args.force,
                            args.points, args.engine, args.max_error, args.prefer, args.memory)
    except ExportError as error:
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
    for line in summary(record):
        print(f"  {line}", file=stdout)
    print(f"  certificate sha256 {record['certificate_sha256']}", file=stdout)
    print(f"# a spec beside {args.out.name} loads it back with:", file=stdout)
    print(load_snippet(record, args.out.name), file=stdout)
    return 0
