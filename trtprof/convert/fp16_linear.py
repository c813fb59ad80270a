"""onnxconverter-common's conversion, without its quadratic steps (issue 36 item 8).

Why: ``float16.convert_float_to_float16`` ends with ``sort_topology``, which finds each next node by
scanning every remaining node (O(N²) per conversion), and ``insert_cast32_before_node`` scans all value
infos for every input of every node kept in FP32 (O(kept × tensors)). fix-fp16 converts once per trial,
so a 2,500-node chain took 422 s and a 10,000-node graph did not finish one trial in 600 s.

``linear_conversion()`` swaps them (and ``remove_unnecessary_cast_node``'s list scans) for versions that give the *same* graph in O(N log N) and
O(kept + tensors): the sort is Kahn's algorithm that always takes the ready node that came first in the
original order — exactly the node the library's scan would find — and the cast insertion looks value infos
up in a dict built once per graph. Swapped only for the duration of one conversion (under a lock: the
library's module globals are shared by every thread).
"""
from __future__ import annotations

import heapq
import itertools
import threading
from contextlib import contextmanager
from typing import Any, Iterator

_SWAP = threading.Lock()


def sort_graph_node(graph: Any) -> None:
    """The library's ``sort_graph_node`` in O(N log N): same order, same handling of its edge cases (a
    tensor counts as produced until the first of its producers is placed; nodes left once every tensor is
    placed stay in front, in their order, as the library leaves them)."""
    nodes = list(graph.node)
    produced: dict[str, None] = {}
    for node in nodes:
        for name in node.output:
            produced[name] = None
    consumers: dict[str, list[int]] = {}
    waiting = [0] * len(nodes)
    for i, node in enumerate(nodes):
        for name in set(node.input):
            if name in produced:
                consumers.setdefault(name, []).append(i)
                waiting[i] += 1
    ready = [i for i, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    placed: list[int] = []
    taken = [False] * len(nodes)
    while produced:
        if not ready:
            raise ValueError("the graph has a cycle: no node is ready while tensors are still unproduced")
        i = heapq.heappop(ready)
        taken[i] = True
        placed.append(i)
        for name in nodes[i].output:
            if name in produced:
                del produced[name]
                for j in consumers.get(name, ()):
                    waiting[j] -= 1
                    if waiting[j] == 0:
                        heapq.heappush(ready, j)
    order = [i for i in range(len(nodes)) if not taken[i]] + placed
    copies = [type(nodes[0])() for _ in nodes] if nodes else []
    for copy, i in zip(copies, order):
        copy.CopyFrom(nodes[i])
    del graph.node[:]
    graph.node.extend(copies)


def sort_topology(graph: Any) -> None:
    """The library's ``sort_topology``: the graph, then every subgraph of its nodes' attributes."""
    sort_graph_node(graph)
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g") and len(attr.g.node) > 0:
                sort_topology(attr.g)
            for sub in attr.graphs:
                sort_topology(sub)


def process_node_in_block_list(graph: Any, global_input_name_dict: dict, op_block_list: Any,
                               node_block_list: Any) -> None:
    """The library's ``process_node_in_block_list`` with the value infos indexed once per graph: a cast
    before each FLOAT16 input and after each FLOAT output of every node kept in FP32."""
    from onnx import onnx_pb as onnx_proto
    from onnxconverter_common import float16

    blocked = [node for node in graph.node if node.op_type in op_block_list or node.name in node_block_list]
    inputs_info: dict[str, Any] = {}
    for info in itertools.chain(graph.value_info, graph.input):  # the library takes the first match
        inputs_info.setdefault(info.name, info)
    outputs_info: dict[str, Any] = {}
    for info in itertools.chain(graph.value_info, graph.output):
        outputs_info.setdefault(info.name, info)
    for node in blocked:
        for i, name in enumerate(list(node.input)):
            info = inputs_info.get(name)
            if info is None or info.type.tensor_type.elem_type != onnx_proto.TensorProto.FLOAT16:
                continue
            cast_output = node.name + "_input_cast_" + str(i)
            float16.add_new_value_info(graph, info, cast_output, onnx_proto.TensorProto.FLOAT)
            inputs_info.setdefault(cast_output, graph.value_info[-1])
            outputs_info.setdefault(cast_output, graph.value_info[-1])
            float16.add_cast_node(graph, [name], [cast_output], node.name + "_input_cast" + str(i),
                                  onnx_proto.TensorProto.FLOAT)
            node.input[i] = cast_output
        for i, name in enumerate(list(node.output)):
            info = outputs_info.get(name)
            if info is None or info.type.tensor_type.elem_type != onnx_proto.TensorProto.FLOAT:
                continue
            cast_input = node.name + "_output_cast_" + str(i)
            float16.add_new_value_info(graph, info, cast_input, onnx_proto.TensorProto.FLOAT)
            inputs_info.setdefault(cast_input, graph.value_info[-1])
            outputs_info.setdefault(cast_input, graph.value_info[-1])
            info.type.tensor_type.elem_type = onnx_proto.TensorProto.FLOAT16
            float16.add_cast_node(graph, [cast_input], [name], node.name + "_output_cast" + str(i),
                                  onnx_proto.TensorProto.FLOAT16)
            node.output[i] = cast_input


def remove_unnecessary_cast_node(graph: Any) -> None:
    """The library's ``remove_unnecessary_cast_node`` (a Cast to FP16 whose only reader is a Cast back to
    FP32 is bypassed and both removed) with its list scans made lookups: membership by node name (the
    library's own dicts already key casts by name) and one rebuild of the node list instead of a
    ``remove`` per node. Its conditions are copied as they are, the multi-reader branch included."""
    casts = [node for node in graph.node if node.op_type == "Cast"]
    by_name = {node.name: node for node in casts}
    live = set(by_name)
    input_to_cast = {name: node for node in casts for name in node.input}
    output_to_cast = {name: node for node in casts for name in node.output}
    upstream: dict[str, Any] = {}
    downstream: dict[str, Any] = {}
    for current in graph.node:
        for name in current.input:
            if name in output_to_cast:
                cast = output_to_cast[name]
                if cast.name not in downstream:
                    downstream[cast.name] = current
                elif isinstance(downstream[cast.name], list):
                    downstream[cast.name].append(current)
                else:
                    downstream[cast.name] = [downstream[cast.name], current]
        for name in current.output:
            if name in input_to_cast:
                upstream[input_to_cast[name].name] = current
    for name, node in upstream.items():
        if node.op_type == "Constant":
            live.discard(name)
    pairs = []
    for name, after in downstream.items():
        cast = by_name[name]
        if isinstance(after, list):
            pairs += [(cast, dn) for dn in after if dn.op_type == "Cast" and dn.attribute[0].i == 32
                      and cast.attribute[0].i == 16 and dn.name in live and cast.name in live]
        elif (after.op_type == "Cast" and cast.attribute[0].i == 10 and after.attribute[0].i == 1
              and after.name in live and cast.name in live):
            pairs.append((cast, after))
    for first, second in pairs:
        before, after = upstream.get(first.name), downstream.get(second.name)
        if before is not None and after is None:
            raise ValueError("The downstream node of the second cast node should be graph output")
        if after is None:  # neither an upstream nor a downstream node: nothing to rewire
            continue
        source = first.input[0] if before is None else next((o for o in before.output if o == first.input[0]), None)
        for i, name in enumerate(after.input):
            if name in second.output:
                after.input[i] = source
    if pairs:
        dropped = {id(n) for pair in pairs for n in pair}
        kept = [type(graph.node[0])() for n in graph.node if id(n) not in dropped]
        for copy, node in zip(kept, [n for n in graph.node if id(n) not in dropped]):
            copy.CopyFrom(node)
        del graph.node[:]
        graph.node.extend(kept)


@contextmanager
def linear_conversion() -> Iterator[None]:
    """onnxconverter-common's ``float16`` module with the linear replacements above, for one call.
    The cast insertion also ends where the library's does not: with Cast itself kept in FP32
    (``--keep-fp32-ops Cast``) the library's loop visits the casts it inserts as the node list grows
    under it, and inserts casts for those, forever; here the kept nodes are listed before inserting."""
    from onnxconverter_common import float16

    with _SWAP:
        saved = float16.sort_topology, float16.process_node_in_block_list, float16.remove_unnecessary_cast_node
        float16.sort_topology, float16.remove_unnecessary_cast_node = sort_topology, remove_unnecessary_cast_node
        float16.process_node_in_block_list = process_node_in_block_list
        try:
            yield
        finally:
            float16.sort_topology, float16.process_node_in_block_list, float16.remove_unnecessary_cast_node = saved
