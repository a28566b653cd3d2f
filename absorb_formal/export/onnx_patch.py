"""`scan MODEL.onnx --export DIR`: the ONNX model with its MLP sublayers' skips absorbed.

For each exported sublayer the graph is changed in two places, and nowhere else:

- its weight and bias tensors (initializers or Constant nodes, under their own names, in
  their own layout and data type) now hold the plain witness, correctly rounded; the hidden
  width may grow, so the MatMul / Gemm weight shapes change with it;
- the residual Add that adds the sublayer's input to its branch is removed, and what read
  its sum reads the branch's output instead (an Add whose sum is a graph output, or is read
  inside a subgraph, becomes an Identity under the same name).

That is exact where the model computes what the witness replaces (docs/rules.md §10): a
bare sublayer x + F(x) becomes P(x); a post-norm N(x + F(x)) becomes N(P(x)), the norm kept.
A pre-norm or sandwich sublayer has no such form; `--export-bare` writes the bare block's
witness there all the same, and the record says the model is not a drop-in replacement.

Refused, naming the tensor or value, before anything is written: a weight or bias that other
nodes read too (shared between sublayers, or with anything outside the MLP), one stored as
external data or in a Constant node of a kind not rewritten, one whose data type is not the
witness's, a value computed inside the MLP that something outside it reads, no single
residual Add around the sublayer. External data of the tensors that are not rewritten is
copied beside the new model, file for file.

The model is parsed and written by the onnx package. When onnxruntime is installed, the
written model and the original are run on seeded random inputs and the largest relative
difference of their outputs is recorded; without it the record says it was not run. That
difference is the runtime's float arithmetic as much as the weights' rounding (x + F(x) and
P(x) round differently, and a norm after them magnifies it), so it is not held to the
export gate itself (`export.default_max_error`, 16 epsilons of the format, which a correct
float32 model of a few dozen neurons already nears) but to √ε of the format
(`runtime_bound`), above that gate: a wrong rewrite is off by far more, and writes nothing.
The rounding of the weights themselves is recorded exactly, per sublayer.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..export.files import write_new
from ..scanner.found import FoundBlock, ScanError
from ..scanner.onnx_find import _gated
from ..scanner.onnx_graph import Graph, Linear
from ..scanner.onnx_sigma import Mismatch
from ..weights import onnx_file
from .construction import Witness
from .record import summary
from .rounding import ExportError
from .sample import EPSILON, default_max_error

FIELDS = ("up", "gate", "down", "up_bias", "gate_bias", "down_bias")
ONNX_TYPES = {"float32": 1, "float64": 11, "bfloat16": 16}  # the witness's dtype → data_type
RUNTIME_DRAWS = 4  # seeded input draws for the onnxruntime comparison
SYMBOLIC_DIM = 4  # the size given to a graph input's named (or unknown) dimension
KEY = "absorb_formal"


@dataclass
class Plan:
    """What changes for one sublayer: its tensors (field → name), the residual Add removed,
    the branch value its readers read instead, and the MLP's nodes."""

    block: FoundBlock
    tensors: dict[str, str]
    residual: Any
    branch: str
    mlp_in: str = ""
    interior: list[Any] = field(default_factory=list)
    changed: set[str] = field(default_factory=set)  # values whose shape or value changes


# ---- where each sublayer is in the graph ---------------------------------------------------

def _located(graph: Graph, block: FoundBlock) -> tuple[Linear, Linear, Linear | None]:
    """The up, down and gate layers of a found block, read again from the graph."""
    for node in graph.nodes:
        try:
            down = graph.linear_node(node)
            if down is None or down.weight.key != block.down.key:
                continue
            down = graph.with_bias(down)
            gated = _gated(graph, down.input)
            if gated is not None:
                _, gate, up = gated
            else:
                plain = graph.activation(down.input)
                if plain is None:
                    continue
                (_, up), gate = plain, None
        except Mismatch:
            continue
        if up.weight.key == block.up.key and (gate.weight.key if gate else None) == (
                block.gate.key if block.gate else None):
            return up, down, gate
    raise ScanError(f"--export: {block.where}: its layers are not found again in the graph")


def _outer_names(proto: Any) -> set[str]:
    """Names read by the nodes of subgraphs (If, Loop, Scan bodies): they may read the main
    graph's values by name, so those values keep their names."""
    out: set[str] = set()

    def visit(graph: Any) -> None:
        for node in graph.node:
            out.update(node.input)
            for attribute in node.attribute:
                for sub in ([attribute.g] if attribute.HasField("g") else []) + list(
                        attribute.graphs):
                    visit(sub)

    for node in proto.graph.node:
        for attribute in node.attribute:
            for sub in ([attribute.g] if attribute.HasField("g") else []) + list(
                    attribute.graphs):
                visit(sub)
    return out


def plan(graph: Graph, block: FoundBlock, outer: set[str]) -> Plan:
    """The changes for one sublayer (ScanError naming what stands in the way)."""
    where = f"--export: {block.where}"
    up, down, gate = _located(graph, block)
    mlp_in, out = graph.source(up.input), down.output
    norms = graph.norms()
    placement = block.norm.placement if block.norm is not None else None
    if placement == "unknown":
        raise ScanError(f"{where}: the norm beside it is not placed, so no Add can be "
                        "removed exactly")
    x, branch_out, allowed = mlp_in, out, set()
    if placement in ("pre", "sandwich"):
        first = norms.at(mlp_in)
        if first is None:
            raise ScanError(f"{where}: its {placement}-norm is not found again in the graph")
        x = first.input
        if placement == "sandwich":
            seconds = [n for n in norms.by_input.get(graph.source(out), [])
                       if norms.residual_adds(n.output, x)]
            if len(seconds) != 1:
                raise ScanError(f"{where}: its second norm is not found again in the graph")
            branch_out, allowed = seconds[0].output, seconds[0].inside
    adds = norms.residual_adds(branch_out, x)
    if len(adds) != 1:
        raise ScanError(f"{where}: {'no' if not adds else 'more than one'} residual Add of the "
                        "sublayer's input to its output is in the graph, so there is no skip "
                        "to remove; the plain MLP computes x + MLP(x), which the model would "
                        "then add to x again")
    residual = adds[0]
    branch = next(v for v in residual.input if graph.source(v) == graph.source(branch_out))
    tensors = {name: ref.key for name in FIELDS
               if (ref := getattr(block, name)) is not None}
    interior = _interior(graph, out, mlp_in, where)
    changed = _changed(graph, interior, {mlp_in, *tensors.values()})
    result = Plan(block, tensors, residual, branch, mlp_in, interior, changed)
    _check_readers(graph, result, out, residual, allowed, outer, where)
    return result


def _interior(graph: Graph, out: str, mlp_in: str, where: str) -> list[Any]:
    """The nodes that compute the MLP's output from its input and stored tensors (in graph
    order)."""
    inside: dict[int, Any] = {}
    todo, seen = [out], set()
    while todo:
        value = todo.pop()
        if value in seen or graph.source(value) == graph.source(mlp_in):
            continue
        seen.add(value)
        node = graph.producer.get(value)
        if node is None:
            if value not in graph.initializers:
                raise ScanError(f"{where}: the MLP reads {value!r} besides its input")
            continue
        if id(node) not in inside:
            inside[id(node)] = node
            todo.extend(v for v in node.input if v)
    return [node for node in graph.nodes if id(node) in inside]


def _changed(graph: Graph, interior: list[Any], marks: set[str]) -> set[str]:
    """The values of the MLP that depend on its input or on a rewritten tensor."""
    changed = set(marks)
    for node in interior:
        if any(v in changed or graph.source(v) in changed for v in node.input if v):
            changed.update(node.output)
    return changed


def _check_readers(graph: Graph, found: Plan, out: str, residual: Any, allowed: set[str],
                   outer: set[str], where: str) -> None:
    outputs = {o.name for o in graph.proto.graph.output}
    inside = {id(node) for node in found.interior}
    names = set(found.tensors.values())
    for value in sorted(found.changed - {out, found.mlp_in}):  # the output: below
        readers = [n for n in graph.consumers.get(value, []) if id(n) not in inside]
        what = f"tensor {value!r}" if value in names else f"value {value!r} of the MLP"
        if readers:
            node = readers[0]
            raise ScanError(f"{where}: {what} is also read by a {node.op_type} node "
                            f"{node.name!r} outside this MLP (shared), so it cannot be "
                            "replaced by the plain MLP's; nothing written")
        if value in outputs or value in outer:
            raise ScanError(f"{where}: {what} is a graph output or read inside a subgraph, so "
                            "it cannot be replaced; nothing written")
    # what reads the MLP's output (through Identity nodes): its residual Add, or its second
    # norm (sandwich); anything else would read P(x) where it read F(x)
    aliases, todo = {out}, [out]
    while todo:
        for node in graph.consumers.get(todo.pop(), []):
            if node.op_type == "Identity" and node.output[0] not in aliases:
                aliases.add(node.output[0])
                todo.append(node.output[0])
    others = [n for n in graph.users(out) if n is not residual
              and not any(o in allowed for o in n.output)]
    if others or aliases & (outputs | outer):
        what = (f"a {others[0].op_type} node {others[0].name!r}" if others
                else "a graph output or subgraph")
        raise ScanError(f"{where}: its output {out!r} is read by {what} besides the residual "
                        "Add, which would read the plain MLP's x + MLP(x) in place of MLP(x); "
                        "nothing written")


# ---- tensors --------------------------------------------------------------------------------

def _stored(graph: Graph, name: str, where: str) -> tuple[Any, Any]:
    """(the TensorProto under `name`, the Constant node holding it or None), refused when it
    cannot be rewritten in place."""
    if name in graph.initializers:
        tensor, node = graph.initializers[name], None
    else:
        node = graph.producer.get(name)
        values = [a for a in node.attribute] if node is not None else []
        if node is None or node.op_type != "Constant" or len(values) != 1 or \
                values[0].name not in ("value", "value_floats"):
            raise ScanError(f"--export: {where}: tensor {name!r} is not stored as an "
                            "initializer or a Constant node's value, so it cannot be rewritten")
        tensor = values[0].t if values[0].name == "value" else None
        if tensor is None:  # value_floats: a float32 vector
            return None, node
    if tensor.data_type not in ONNX_TYPES.values():
        raise ScanError(f"--export: {where}: tensor {name!r} is "
                        f"{onnx_file.type_name(tensor.data_type)}; the witness is rounded to "
                        "FLOAT, DOUBLE or BFLOAT16 only, so it cannot be rewritten")
    if tensor.HasField("data_location") and tensor.data_location == onnx_file.EXTERNAL:
        raise ScanError(f"--export: {where}: tensor {name!r} is stored as external data, "
                        "which is not rewritten; store the model's MLP tensors in the file "
                        "(onnx.load_model, then onnx.save_model without external data)")
    return tensor, node


def _proto(onnx: Any, name: str, values: np.ndarray, dims: list[int]) -> Any:
    shape = (1,) * (len(dims) - values.ndim) + values.shape  # a [1, m] bias stays [1, m']
    array = np.ascontiguousarray(values.reshape(shape))
    if array.dtype == np.uint16:  # bfloat16 bit patterns
        return onnx.TensorProto(name=name, data_type=onnx.TensorProto.BFLOAT16,
                                dims=list(shape), raw_data=array.astype("<u2").tobytes())
    return onnx.numpy_helper.from_array(array, name)


def _rewrite(onnx: Any, graph: Graph, found: Plan, replaced: dict[str, np.ndarray],
             where: str) -> None:
    """Each tensor of the plan replaced in place (checked first, so a refusal changes
    nothing that is written)."""
    news = []
    for name in found.tensors.values():
        tensor, node = _stored(graph, name, where)
        values = replaced[name]
        data_type = 1 if tensor is None else tensor.data_type
        code = ONNX_TYPES["bfloat16" if values.dtype == np.uint16 else values.dtype.name]
        if data_type != code:
            raise ScanError(f"--export: {where}: tensor {name!r} is "
                            f"{onnx_file.type_name(data_type)}, which the witness is not "
                            "rounded to (FLOAT, DOUBLE and BFLOAT16 are)")
        dims = [values.shape[0]] if tensor is None else [int(n) for n in tensor.dims]
        stored_name = name if node is None else tensor.name if tensor is not None else ""
        news.append((name, node, _proto(onnx, stored_name, values, dims)))
    for name, node, new in news:
        if node is None:
            graph.initializers[name].CopyFrom(new)
        else:
            del node.attribute[:]
            node.attribute.append(onnx.helper.make_attribute("value", new))
        for item in graph.proto.graph.input:  # an initializer listed as a graph input too
            if item.name == name:
                shape = item.type.tensor_type.shape
                del shape.dim[:]
                for n in new.dims:
                    shape.dim.add().dim_value = int(n)


def _tensors(report: Any, answer: Any, where: str, originals: FoundBlock, prefer: str,
             max_error: float | None, lines: list[str] | None = None
             ) -> tuple[dict[str, np.ndarray], float, Witness]:
    """The plain witness's tensors under the sublayer's names (`plain.chosen`, its
    construction chosen and gated as for a safetensors export, then `plain.plain_tensors`):
    a bias the graph lacks must be zero (there is no node to add it)."""
    from .plain import chosen as chosen_plain
    from .plain import plain_tensors

    chosen = chosen_plain(report, answer, report.checkpoint.root, prefer, max_error)
    witness = chosen.witness
    tensors, rounding = plain_tensors(answer, chosen, witness.claim_width)
    if lines is not None:  # what the screen shows, as for a safetensors export
        from .plain import record

        lines.append(f"{where}: width {witness.claim_width} ({witness.construction})")
        lines += [f"  {line}" for line in summary(record(chosen, where))
                  if not line.startswith("max rounding")]
    names = {getattr(originals, f).key for f in FIELDS if getattr(originals, f) is not None}
    for key in [k for k in tensors if k not in names]:
        values = tensors.pop(key)
        if np.any(values != 0):
            raise ScanError(f"--export: {where}: the plain MLP needs a bias ({key!r}) that the "
                            "graph has no tensor or Add node for; nothing written")
    return tensors, rounding, witness


# ---- the whole export ---------------------------------------------------------------------

def problem(path: Path, bare: bool) -> str:
    """Why no patched model can be written for the ONNX model at `path`, found before the
    scan decides anything ('' when none is seen yet)."""
    from ..scanner.onnx_find import find_blocks

    try:
        onnx_file.onnx_module("writing")
        blocks, _ = find_blocks(path)
        graph = Graph(path)
        outer = _outer_names(graph.proto)
        for block in blocks:
            if block.norm is not None and block.norm.placement in ("pre", "sandwich") \
                    and not bare:
                continue  # refused once decided, with the answer (`export._exported`)
            if block.norm is not None and block.norm.placement == "unknown":
                continue  # not decided: refused as having no proved width
            found = plan(graph, block, outer)
            for name in found.tensors.values():
                _stored(graph, name, block.where)
    except (ScanError, onnx_file.OnnxError, Mismatch) as error:
        return str(error)
    return ""


def note(blocks: list[FoundBlock]) -> str:
    """What the record says of the patched model whose sublayers are `blocks` (as found)."""
    placed = [b.where for b in blocks if b.norm is not None
              and b.norm.placement in ("pre", "sandwich")]
    if placed:
        return ("NOT A DROP-IN REPLACEMENT: the MLPs of " + ", ".join(placed) + " compute the "
                "bare block x + MLP(x) of the original (the paper's question, --export-bare), "
                "but the model computes a norm beside them (x + MLP(N(x))); with their residual "
                "Adds removed this model computes other outputs than the original")
    return ("a drop-in replacement: each listed sublayer's residual Add is removed and its MLP "
            "computes what the original's residual sum computed (x + MLP(x), or for a "
            "post-norm sublayer what its norm reads it as); its norm, if any, is kept")


def export_onnx(report: Any, exported: Any, out: Path, prefer: str = "width",
                max_error: float | None = None, lines: list[str] | None = None) -> Path:
    """Write the patched model of `report` (the scan) with the witnesses of `exported` (its
    answers as `export._exported` chose them) to out/model.onnx."""
    onnx = onnx_file.onnx_module("writing")
    checkpoint = report.checkpoint
    source = Path(checkpoint.path)
    try:
        graph = Graph(source)
    except onnx_file.OnnxError as error:
        raise ScanError(f"{source}: {error}") from None
    outer = _outer_names(graph.proto)
    originals = {a.block.where: a.block for a in report.blocks}
    plans = [plan(graph, originals[a.block.where], outer) for a in exported.blocks]
    record: dict[str, Any] = {"skip_absorbed": [], "widths": {}, "widths_proved": {},
                              "width_notes": {}, "max_rounding_rel_error": {}}
    dtypes = set()
    for answer, found in zip(exported.blocks, plans, strict=True):
        where = answer.block.where
        tensors, rounding, witness = _tensors(exported, answer, where, found.block, prefer,
                                              max_error, lines)
        dtypes.update(v.dtype.name for v in tensors.values())
        _rewrite(onnx, graph, found, tensors, where)
        record["skip_absorbed"].append(where)
        record["widths"][where] = witness.claim_width
        record["widths_proved"][where] = answer.proved_width
        if witness.width_note:
            record["width_notes"][where] = witness.width_note
        record["max_rounding_rel_error"][where] = float(f"{rounding:.6g}")
    if not record["width_notes"]:
        del record["width_notes"]
    _cut_skips(onnx, graph, plans, outer)
    model = graph.proto
    dtype = "float64" if dtypes == {"float64"} else "bfloat16" if "uint16" in dtypes \
        else "float32"
    record["note"] = note([found.block for found in plans])
    staging = Path(tempfile.mkdtemp(prefix=".absorb-export-", dir=out.parent
                                    if out.parent.exists() else None))
    try:
        target = staging / "model.onnx"
        _copy_external(graph, source.parent, staging)
        _write(model, record, target)
        _checked(onnx, source, target)
        drop_in = not record["note"].startswith("NOT A DROP-IN")  # else the outputs differ
        record["runtime_check"] = runtime_check(
            source, target, runtime_bound(dtype) if drop_in else None, set(graph.initializers))
        if isinstance(record["runtime_check"], dict):  # for comparison: the export gate
            record["runtime_check"]["export_gate"] = default_max_error(dtype)
        target.unlink()
        _write(model, record, target)
        out.mkdir(parents=True, exist_ok=True)
        for item in staging.iterdir():
            if (out / item.name).exists():
                raise ScanError(f"{out / item.name}: exists; not replaced")
        for item in sorted(staging.iterdir(), key=lambda p: p.name == "model.onnx"):
            shutil.move(str(item), out / item.name)  # the model last: complete once there
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def _cut_skips(onnx: Any, graph: Graph, plans: list[Plan], outer: set[str]) -> None:
    """Each residual Add removed, its readers reading the branch; an Add whose sum is a graph
    output (or read in a subgraph) becomes an Identity of the branch under that name.
    Value shapes recorded for changed values are dropped (the width changed)."""
    proto = graph.proto.graph
    outputs = {o.name for o in proto.output}
    renamed: dict[str, str] = {}
    removed: set[int] = set()
    kept: dict[int, Any] = {}
    for found in plans:
        add, branch = found.residual, found.branch
        total = add.output[0]
        if total in outputs or total in outer:
            kept[id(add)] = onnx.helper.make_node("Identity", [branch], [total],
                                                  name=add.name or None)
        else:
            removed.add(id(add))
            renamed[total] = branch
    for name, branch in list(renamed.items()):  # a branch that is itself a removed sum
        while branch in renamed:
            branch = renamed[branch]
        renamed[name] = branch
    nodes = []
    for node in proto.node:
        if id(node) in removed:
            continue
        node = kept.get(id(node), node)
        for i, value in enumerate(node.input):
            if value in renamed:
                node.input[i] = renamed[value]
        nodes.append(node)
    copies = [type(n)() for n in nodes]
    for copy, node in zip(copies, nodes, strict=True):
        copy.CopyFrom(node)
    del proto.node[:]
    proto.node.extend(copies)
    stale = set().union(*(p.changed - {p.mlp_in} for p in plans)) | set(renamed)
    infos = [v for v in proto.value_info if v.name not in stale]
    del proto.value_info[:]
    proto.value_info.extend(infos)


def _copy_external(graph: Graph, folder: Path, staging: Path) -> None:
    for location in graph.index.externals:
        source = onnx_file.external_path(folder, location, graph.file, "")
        target = onnx_file.external_path(staging, location, graph.file, "")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def _write(model: Any, record: dict[str, Any], target: Path) -> None:
    props = [p for p in model.metadata_props if not p.key.startswith(KEY)]
    del model.metadata_props[:]
    model.metadata_props.extend(props)
    entries = {KEY: json.dumps(record, sort_keys=True), f"{KEY}.note": record["note"]}
    for key, value in entries.items():
        item = model.metadata_props.add()
        item.key, item.value = key, value
    try:
        data = model.SerializeToString()
    except Exception as error:  # noqa: BLE001 - protobuf's 2 GiB limit, and the like
        raise ScanError(f"--export: the patched model cannot be serialised ({error}); "
                        "store its large tensors as external data") from None
    try:
        write_new(target, lambda stream: stream.write(data))
    except ExportError as error:
        raise ScanError(str(error)) from None


def _checked(onnx: Any, source: Path, target: Path) -> None:
    """The ONNX checker on the written model, when the original passes it."""
    try:
        onnx.checker.check_model(str(source))
    except Exception:  # noqa: BLE001 - the original is not held to the checker's rules
        return
    try:
        onnx.checker.check_model(str(target))
    except Exception as error:  # noqa: BLE001
        raise ScanError(f"--export: the patched model fails the ONNX checker, which the "
                        f"original passes: {str(error)[:300]}; nothing written") from None


# ---- the runtime comparison ---------------------------------------------------------------

_NUMPY = {"tensor(float)": np.float32, "tensor(double)": np.float64,
          "tensor(float16)": np.float16, "tensor(int64)": np.int64, "tensor(int32)": np.int32,
          "tensor(bool)": np.bool_}


def runtime_bound(dtype: str) -> float:
    """The largest relative output difference written: √ε of the weights' format, never
    below the export gate (float32: 3.5e-4; the gate is 1.9e-6)."""
    return max(EPSILON[dtype] ** 0.5, default_max_error(dtype))


def runtime_check(original: Path, patched: Path, allowed: float | None,
                  stored: Collection[str] = ()) -> dict[str, Any] | str:
    """Both models run by onnxruntime on seeded random inputs (floats standard normal,
    integers and booleans 0 or 1, named dimensions SYMBOLIC_DIM): the largest difference of
    any float output, relative to that output's largest magnitude. ScanError beyond
    `allowed` (None: measured only, for a model that is not a drop-in replacement); a
    string saying why when it is not run. Graph inputs in `stored` (initializers listed as
    inputs too) keep their stored values."""
    try:
        import onnxruntime
    except ImportError:
        return "not run: onnxruntime is not installed"
    try:
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        sessions = [onnxruntime.InferenceSession(str(p), options,
                                                 providers=["CPUExecutionProvider"])
                    for p in (original, patched)]
        rng = np.random.default_rng(0)
        worst = 0.0
        for _ in range(RUNTIME_DRAWS):
            feeds = {}
            for item in sessions[0].get_inputs():
                if item.name in stored:
                    continue
                kind = _NUMPY.get(item.type)
                if kind is None:
                    return f"not run: input {item.name!r} is {item.type}"
                shape = [d if isinstance(d, int) and d > 0 else SYMBOLIC_DIM
                         for d in item.shape]
                feeds[item.name] = (rng.standard_normal(shape).astype(kind)
                                    if np.issubdtype(kind, np.floating)
                                    else rng.integers(0, 2, shape).astype(kind))
            before, after = (s.run(None, feeds) for s in sessions)
            for a, b in zip(before, after, strict=True):
                a, b = np.asarray(a), np.asarray(b)
                if not np.issubdtype(a.dtype, np.floating):
                    continue
                a, b = a.astype(np.float64), b.astype(np.float64)
                scale = float(np.abs(a).max(initial=0.0)) or 1.0
                worst = max(worst, float(np.abs(a - b).max(initial=0.0)) / scale)
    except Exception as error:  # noqa: BLE001 - a model the runtime cannot run is not refused
        return f"not run: onnxruntime cannot run it ({type(error).__name__}: {str(error)[:200]})"
    if allowed is not None and not worst <= allowed:
        raise ScanError(f"--export: onnxruntime computes outputs of the patched model that "
                        f"differ from the original's by {worst:.6g} (relative to each "
                        f"output's largest value, over {RUNTIME_DRAWS} seeded inputs), beyond "
                        f"the {allowed:.6g} that float arithmetic explains: the rewrite is "
                        "wrong; nothing written")
    return {"runtime": f"onnxruntime {onnxruntime.__version__}", "draws": RUNTIME_DRAWS,
            "max_rel_difference": float(f"{worst:.6g}"), "allowed": allowed}
