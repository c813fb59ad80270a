"""Graph repairs around onnxconverter-common's FP16 converter, for graphs it mishandles.

Each function fixes one thing found by converting models trtprof's authors did not write, and
changes nothing else (same function, same tensor values):

* ``drop_initializer_inputs``: IR < 4 models list weights as inputs; the converter keeps those
  inputs FP32 while making the weights FP16 ("Tensor element type mismatch").
* ``name_unnamed_nodes``: the converter names the casts it inserts after the node they serve; two
  unnamed consumers of one input give two casts named ``x_cast_to_`` and ORT refuses the graph
  ("two nodes with same node name"). Names also let ``--layer-precisions`` address every node.
* ``detach_graph_outputs``: a graph output that another node also reads (or that is a weight) gets
  its FP32 cast, but the reader still expects the FP16 tensor: "Type (tensor(float16)) of output
  arg (gp) … does not match expected type (tensor(float))".
* ``retype_float_outputs`` (after conversion): a model's own ``Cast(to=FLOAT)`` keeps saying FLOAT
  while the converter declares its output FLOAT16 ("Type (tensor(float16)) of output arg (f) of node
  (cast) does not match expected type (tensor(float))").
* ``fill_constant_of_shape`` (after conversion): a ``ConstantOfShape`` without ``value`` makes
  float32 zeros while the converter declared its output FLOAT16.
* ``restore_output_types`` (after conversion): a graph output produced by a node kept in FP32 came out
  FP16 despite ``keep_io_types``.
* ``split_shared_initializers`` (before conversion, with a keep-list): the converter leaves every
  weight that a node kept in FP32 reads in FP32 — also for the FP16 nodes reading the same weight, with
  no cast: "Type parameter (T) of Optype (Mul) bound to different types (tensor(float16) and
  tensor(float))". The kept readers get their own copy of the weight.
* ``fold_cast_round_trips`` (after conversion): a tensor between two nodes kept in FP32 goes through
  Cast(FP16) → Cast(FP32); the converter removes that pair only when the tensor has one reader, so a
  value above 65504 kept "in FP32" on purpose still became inf.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Iterator

if TYPE_CHECKING:
    import onnx

# Suffix of the internal tensor that replaces a graph output inside the graph (detach_graph_outputs).
DETACHED_SUFFIX = "__trtprof_fp16"
# Name prefix of the Identity node that then produces the graph output.
DETACH_NODE_PREFIX = "trtprof_output_"

_FLOAT, _FLOAT16 = 1, 10  # onnx.TensorProto.FLOAT / FLOAT16, without importing onnx at module load


def drop_initializer_inputs(model: "onnx.ModelProto") -> bool:
    """Remove graph inputs that are really initializers (in place); True when any was removed.

    Models written for IR version < 4 (old model zoos, Caffe2 exports) must list every initializer
    as a graph input too. The FP16 converter turns those initializers into FP16 but, with
    ``keep_io_types``, keeps the matching *inputs* declared FP32, and the result no longer
    type-checks ("Tensor element type mismatch. 10 != 1"). From IR 4 on, initializers need not be
    inputs, so dropping them (and raising the IR version to 4) changes nothing else.
    """
    initializers = {init.name for init in model.graph.initializer}
    if not any(inp.name in initializers for inp in model.graph.input):
        return False
    keep = [inp for inp in model.graph.input if inp.name not in initializers]
    del model.graph.input[:]
    model.graph.input.extend(keep)
    model.ir_version = max(model.ir_version, 4)
    return True


def default_node_name(op_type: str, index: int) -> str:
    """The name trtprof gives the ``index``-th node of the graph when the model gives it none."""
    return f"{op_type}_{index}"


def name_unnamed_nodes(model: "onnx.ModelProto") -> int:
    """Give every unnamed top-level node a unique name ``OpType_INDEX`` (in place); return how many.

    Deterministic (graph order), so the range analysis, the build notes and ``--layer-precisions``
    all use the same names for the same model.
    """
    graph = model.graph
    taken = {node.name for node in graph.node if node.name}
    named = 0
    for index, node in enumerate(graph.node):
        if node.name:
            continue
        name = default_node_name(node.op_type, index)
        while name in taken:
            name += "_"
        node.name = name
        taken.add(name)
        named += 1
    return named


def _subgraphs(node: "onnx.NodeProto") -> Iterator["onnx.GraphProto"]:
    for attr in node.attribute:
        if attr.HasField("g"):
            yield attr.g
        yield from attr.graphs


def _rename_reads(graph: "onnx.GraphProto", old: str, new: str) -> None:
    """Rename every read of tensor ``old`` in ``graph`` and its subgraphs (outer-scope reads)."""
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new
        for sub in _subgraphs(node):
            if not any(old == out for n in sub.node for out in n.output):  # not shadowed inside
                _rename_reads(sub, old, new)


def _rename_tensor(graph: "onnx.GraphProto", old: str, new: str) -> None:
    """Rename tensor ``old`` where ``graph``'s nodes produce it and everywhere it is read."""
    for node in graph.node:
        for i, out in enumerate(node.output):
            if out == old:
                node.output[i] = new
    _rename_reads(graph, old, new)


def detach_graph_outputs(model: "onnx.ModelProto") -> list[str]:
    """Make every float graph output the output of its own Identity node (in place), when a node
    also reads it or no node produces it (a weight); return the outputs changed.

    Inside the graph the tensor is renamed ``NAME__trtprof_fp16`` (producer and readers), and
    ``Identity(NAME__trtprof_fp16) → NAME`` feeds the graph output, so the converter's FP32 output
    cast no longer sits between the producer and the other readers.
    """
    graph = model.graph
    produced = {out for node in graph.node for out in node.output}
    read = {name for node in graph.node for name in node.input}
    inputs = {inp.name for inp in graph.input}
    initializers = {init.name: init for init in graph.initializer}
    changed: list[str] = []
    new_nodes = []
    for output in graph.output:
        name = output.name
        if output.type.tensor_type.elem_type != _FLOAT or name in inputs:
            continue  # a graph input passed through stays FP32 on both ends: nothing to fix
        if not (name in read or (name not in produced and name in initializers)):
            continue
        internal = name + DETACHED_SUFFIX
        _rename_tensor(graph, name, internal)
        if name in initializers:
            initializers[name].name = internal
        for info in graph.value_info:
            if info.name == name:
                info.name = internal
        import onnx

        new_nodes.append(onnx.helper.make_node("Identity", [internal], [name], name=DETACH_NODE_PREFIX + name))
        changed.append(name)
    graph.node.extend(new_nodes)
    return changed


# Suffix of the FP32 copy of a weight shared by nodes kept in FP32 and FP16 nodes.
FP32_COPY_SUFFIX = "__trtprof_fp32"


def split_shared_initializers(model: "onnx.ModelProto", blocked: Iterable[str], blocked_ops: Iterable[str]) -> list[str]:
    """Give the nodes kept in FP32 (named in ``blocked`` or of an op in ``blocked_ops``) their own copy
    of every FP32 weight they share with nodes converted to FP16 (in place); return the weights split.

    onnxconverter-common keeps a weight FP32 as soon as one kept node reads it, and casts nothing for
    its FP16 readers, so a keep-list that named one of two nodes sharing a scale constant failed to
    load; which nodes were kept then depended on their neighbours. With a copy each side gets its own
    type and the keep-list builds whatever the neighbours are. Same values, so the same function.
    """
    import onnx

    blocked, blocked_ops = set(blocked), set(blocked_ops)
    graph = model.graph
    inits = {init.name: init for init in graph.initializer if init.data_type == _FLOAT}
    kept_readers: dict[str, list["onnx.NodeProto"]] = {}
    other_readers: set[str] = set()
    for node in graph.node:
        kept = node.name in blocked or node.op_type in blocked_ops
        for name in node.input:
            if name in inits:
                if kept:
                    kept_readers.setdefault(name, []).append(node)
                else:
                    other_readers.add(name)
    split = []
    for name, readers in kept_readers.items():
        if name not in other_readers:
            continue
        copy = onnx.TensorProto()
        copy.CopyFrom(inits[name])
        copy.name = name + FP32_COPY_SUFFIX
        graph.initializer.append(copy)
        for node in readers:
            for i, inp in enumerate(node.input):
                if inp == name:
                    node.input[i] = copy.name
        split.append(name)
    return split


def fold_cast_round_trips(model: "onnx.ModelProto", inserted: Iterable[str]) -> int:
    """Cast(to FP16) → Cast(to FP32) pairs the converter inserted: let the FP32 cast read the FP16
    cast's input directly, and drop FP16 casts nobody reads any more (in place). Returns how many
    FP32 casts were rewired.

    Only casts named in ``inserted`` (the converter's own, i.e. not in the model before conversion)
    are touched: a model's deliberate round trip through FP16 stays. The rewired node stays a Cast to
    FP32, which is exact whatever its new input's type (FP32: a copy; FP16: the same widening).
    """
    inserted = set(inserted)
    graph = model.graph
    to16 = {node.output[0]: node for node in graph.node
            if node.op_type == "Cast" and node.name in inserted and _cast_to(node) == _FLOAT16}
    rewired = 0
    for node in graph.node:
        if node.op_type == "Cast" and node.name in inserted and _cast_to(node) == _FLOAT and node.input[0] in to16:
            node.input[0] = to16[node.input[0]].input[0]
            rewired += 1
    if rewired:
        read = {name for node in graph.node for name in node.input}
        read |= {out.name for out in graph.output}
        dead = [n for n in to16.values() if n.output[0] not in read]
        for node in dead:
            graph.node.remove(node)
    return rewired


# Ops whose output type is an attribute, not their inputs' type: the converter retypes their FLOAT
# outputs to FLOAT16 but leaves the attribute saying FLOAT.
TYPE_ATTRIBUTES = {"Cast": "to", "RandomNormal": "dtype", "RandomUniform": "dtype", "RandomNormalLike": "dtype",
                   "RandomUniformLike": "dtype", "EyeLike": "dtype", "Bernoulli": "dtype"}


def retype_float_outputs(model: "onnx.ModelProto", original: Iterable[str]) -> list[str]:
    """The model's own ``Cast(to=FLOAT)`` (and ``dtype=FLOAT`` generators) whose output the converter
    declared FLOAT16: make them produce FLOAT16 (in place); return their names.

    Without this, "Type (tensor(float16)) of output arg (f) of node (cast) does not match expected
    type (tensor(float))": an int64 mask cast to float, common in NLP models, broke the FP16 build.
    Nodes kept FP32 are untouched (the converter keeps their outputs FLOAT and casts after them).
    """
    original = set(original)
    declared = {info.name: info.type.tensor_type.elem_type for info in model.graph.value_info}
    changed = []
    for node in model.graph.node:
        attr_name = TYPE_ATTRIBUTES.get(node.op_type)
        if attr_name is None or node.name not in original or not node.output:
            continue
        attr = next((a for a in node.attribute if a.name == attr_name), None)
        if attr is None or attr.i != _FLOAT or declared.get(node.output[0]) != _FLOAT16:
            continue
        attr.i = _FLOAT16
        changed.append(node.name)
    return changed


def fill_constant_of_shape(model: "onnx.ModelProto", original: Iterable[str]) -> list[str]:
    """The model's ``ConstantOfShape`` without a ``value`` (float32 zeros by default) whose output the
    converter declared FLOAT16: give it an FP16 zero ``value`` (in place); return their names."""
    import onnx

    original = set(original)
    declared = {info.name: info.type.tensor_type.elem_type for info in model.graph.value_info}
    changed = []
    for node in model.graph.node:
        if (node.op_type != "ConstantOfShape" or node.name not in original or any(a.name == "value" for a in node.attribute)
                or declared.get(node.output[0]) != _FLOAT16):
            continue
        node.attribute.append(onnx.helper.make_attribute("value", onnx.helper.make_tensor("value", _FLOAT16, [1], [0.0])))
        changed.append(node.name)
    return changed


def restore_output_types(model: "onnx.ModelProto", float_outputs: Iterable[str]) -> list[str]:
    """Graph outputs that were FLOAT and came out FLOAT16 get a final Cast to FLOAT (in place); return
    the names of the casts added.

    The converter's FP32-output cast is skipped when a node kept in FP32 produces the output: its
    block-list step declares the output FLOAT16 first, so ``keep_io_types`` silently gave an FP16
    output (and a buffer of the wrong size to a GPU runner).
    """
    import onnx

    wanted = set(float_outputs)
    added = []
    for output in model.graph.output:
        if output.name not in wanted or output.type.tensor_type.elem_type != _FLOAT16:
            continue
        internal = output.name + "__fp16_out"
        _rename_tensor(model.graph, output.name, internal)
        name = output.name + "_cast_to_fp32"
        model.graph.node.append(onnx.helper.make_node("Cast", [internal], [output.name], name=name, to=_FLOAT))
        output.type.tensor_type.elem_type = _FLOAT
        added.append(name)
    return added


def _cast_to(node: "onnx.NodeProto") -> int | None:
    for attr in node.attribute:
        if attr.name == "to":
            return int(attr.i)
    return None


def origin_node(name: str, original: set[str]) -> str | None:
    """The model's node behind a node the converter inserted (``mul2_input_cast0`` → ``mul2``)."""
    if name in original:
        return name
    for marker in ("_input_cast", "_output_cast", "_cast_to_"):
        head, sep, tail = name.partition(marker)
        if sep:
            if head in original:
                return head
            if tail in original:  # graph-input casts are named INPUT_cast_to_READER
                return tail
    return None
