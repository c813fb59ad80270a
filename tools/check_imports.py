"""Check the import graph of a package: no cycles, no private names taken from sibling modules.

    python tools/check_imports.py                  (checks trtprof/ next to this file's parent)
    python tools/check_imports.py --package DIR    (any package directory, e.g. a test's temp package)
    python tools/check_imports.py --graph          (also prints every edge, one "a -> b" a line)

Why a check of its own: the circles that grew last round all ran through imports written *inside*
functions, which Python resolves only when the function first runs, so neither ``import trtprof``
nor mypy notices them. This tool reads every ``import`` statement with ``ast`` wherever it sits
(module level, function bodies, ``try`` blocks) and builds the module graph from them all.

What counts as an edge A -> B: A's source says ``import B``, ``from B import x``, or ``from P import B``
where B is a submodule of P (relative imports resolved). Imports under ``if TYPE_CHECKING:`` count
too: they never run, but a type needed in both directions is the same missing home as a function
needed in both directions (``--runtime-only`` leaves them out, to see what can fail at import time).
The implicit import of a parent package's ``__init__`` is not an edge; an ``__init__`` that imports
its own submodules is read like any other module.

Private names: ``from M import _x`` or ``M._x`` (M imported as a module) where M is another module
of the package and ``_x`` is not a dunder. A name another module needs is public (project style).

A circle is a set of modules that all reach each other (a strongly connected component); each is
printed as the shortest cycle through each of its modules.

Exit status: 0 when the graph has no cycle and no private name crosses a module boundary, 1
otherwise (each cycle is printed as a module chain, each private import with file and line).
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator


@dataclass(frozen=True)
class PrivateUse:
    """One private name of module ``target`` used by module ``source`` (file:line for the report)."""

    source: str
    target: str
    name: str
    path: Path
    line: int


def module_names(package_dir: Path) -> dict[str, Path]:
    """Every module of the package by dotted name (``pkg.sub.mod``; a package by its own name)."""
    root = package_dir.parent
    modules: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def is_type_checking_block(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` or ``if typing.TYPE_CHECKING:``."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_nodes(tree: ast.AST, runtime_only: bool) -> Iterator[ast.AST]:
    """Every node of the tree; with ``runtime_only`` not the bodies of ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if runtime_only and is_type_checking_block(node):
            assert isinstance(node, ast.If)
            stack.extend(node.orelse)
            stack.append(node.test)
            continue
        stack.extend(ast.iter_child_nodes(node))


def resolve_from(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` names (relative levels resolved against ``module``)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(
    module: str, path: Path, modules: dict[str, Path], runtime_only: bool = False
) -> tuple[set[str], list[PrivateUse]]:
    """The package modules ``module`` imports (at any depth in its source) and its private uses."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    private: list[PrivateUse] = []
    module_aliases: dict[str, str] = {}  # local name bound to a package module -> that module
    for node in import_nodes(tree, runtime_only):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    targets.add(alias.name)
                    if alias.asname:
                        module_aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            base = resolve_from(module, is_package, node)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in modules:
                    targets.add(submodule)
                    module_aliases[alias.asname or alias.name] = submodule
                elif base in modules:
                    targets.add(base)
                    if is_private(alias.name) and base != module:
                        private.append(PrivateUse(module, base, alias.name, path, node.lineno))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in module_aliases
            and is_private(node.attr)
            and module_aliases[node.value.id] != module
        ):
            target = module_aliases[node.value.id]
            private.append(PrivateUse(module, target, node.attr, path, node.lineno))
    targets.discard(module)
    return targets, private


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def build_graph(
    package_dir: Path, runtime_only: bool = False
) -> tuple[dict[str, set[str]], list[PrivateUse]]:
    """The import graph (module -> modules it imports) and every cross-module private use."""
    modules = module_names(package_dir)
    graph: dict[str, set[str]] = {}
    private: list[PrivateUse] = []
    for name, path in modules.items():
        graph[name], uses = imports_of(name, path, modules, runtime_only)
        private.extend(uses)
    return graph, private


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module (iterative, sorted)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
                continue
            if child not in graph:
                continue
            if child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return sorted(components)


def shortest_cycle_through(start: str, graph: dict[str, set[str]], members: set[str]) -> list[str]:
    """The shortest chain start -> ... -> start inside one component (breadth-first)."""
    parents: dict[str, str] = {}
    frontier = [start]
    seen = {start}
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    chain = [node]
                    while chain[-1] != start:
                        chain.append(parents[chain[-1]])
                    return list(reversed(chain)) + [start]
                if child not in seen:
                    seen.add(child)
                    parents[child] = node
                    following.append(child)
        frontier = following
    return []


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle through each module that lies on a cycle, duplicates (rotations) dropped."""
    cycles: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()
    for component in strongly_connected(graph):
        members = set(component)
        for node in component:
            chain = shortest_cycle_through(node, graph, members)
            ring = chain[:-1]
            turn = ring.index(min(ring))
            canonical = tuple(ring[turn:] + ring[:turn])
            if canonical not in seen:
                seen.add(canonical)
                cycles.append(list(canonical) + [canonical[0]])
    return cycles


def wing_of(module: str) -> str:
    """The wing a module lives in: the package's first level (``trtprof.stats.speedup`` -> ``trtprof.stats``)."""
    parts = module.split(".")
    return ".".join(parts[:2])


# The wings from the lowest up, as README.md's "Layout" lists them (tests/project/test_layout_order.py keeps the
# two equal): a wing may import the wings on its own level or below, never one above. Wings on one level
# (``errors spec schemas``) may import each other, circles aside.
WING_ORDER = ("errors spec schemas", "util", "system", "model", "engines", "convert", "backends", "builder", "stats",
              "measure", "layers", "diagnose", "compare", "report", "serving sweep train", "cli")
WING_LEVEL = {f"trtprof.{name}": level for level, names in enumerate(WING_ORDER) for name in names.split()}


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(module, module it imports) where the second's wing is above the first's in ``WING_ORDER``; a wing
    missing from the order (a new one) counts as above everything, so adding one means placing it."""
    top = len(WING_ORDER)
    out = []
    for source, targets in graph.items():
        for target in targets:
            ws, wt = wing_of(source), wing_of(target)
            # the package root (its version, public types) is the floor; the root and __main__ sit on top
            if ws == wt or ws in ("trtprof", "trtprof.__main__") or wt == "trtprof":
                continue
            if wt not in WING_LEVEL or WING_LEVEL[wt] > WING_LEVEL.get(ws, top):
                out.append((source, target))
    return sorted(out)


def wing_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph seen from the wings: an arrow A -> B when any module of A imports one of B."""
    wings: dict[str, set[str]] = {}
    for source, targets in graph.items():
        wings.setdefault(wing_of(source), set())
        for target in targets:
            if wing_of(target) != wing_of(source):
                wings[wing_of(source)].add(wing_of(target))
    return wings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(__file__).resolve().parent.parent / "trtprof"
    parser.add_argument("--package", type=Path, default=default, help="package directory (default: trtprof/)")
    parser.add_argument("--graph", action="store_true", help="also print every edge")
    parser.add_argument(
        "--runtime-only", action="store_true", help="leave out imports under `if TYPE_CHECKING:`"
    )
    parser.add_argument(
        "--wings", action="store_true",
        help="also check the graph of the wings (first-level packages and modules): no circle among them, and no "
             "import of a wing above the importer's in WING_ORDER (README's Layout)",
    )
    args = parser.parse_args(argv)
    if not (args.package / "__init__.py").is_file():
        print(f"check_imports: {args.package} is not a package (no __init__.py)", file=sys.stderr)
        return 2
    graph, private = build_graph(args.package, args.runtime_only)
    if args.graph:
        for source in sorted(graph):
            for target in sorted(graph[source]):
                print(f"{source} -> {target}")
    cycles = find_cycles(graph)
    circles = strongly_connected(graph)
    edges = sum(len(targets) for targets in graph.values())
    kinds = "function-level" + ("" if args.runtime_only else " and TYPE_CHECKING")
    print(f"{len(graph)} modules, {edges} import edges ({kinds} imports included)")
    for chain in cycles:
        print("cycle: " + " -> ".join(chain))
    for use in sorted(private, key=lambda u: (str(u.path), u.line)):
        print(f"private name: {use.path}:{use.line}: {use.source} uses {use.target}.{use.name}")
    print(
        f"{len(circles)} circle(s) of modules importing each other, {len(cycles)} cycle(s) listed, "
        f"{len(private)} private name(s) used across modules"
    )
    wing_circles: list[list[str]] = []
    upward: list[tuple[str, str]] = []
    if args.wings:
        wings = wing_graph(graph)
        wing_circles = find_cycles(wings)
        arrows = sum(len(targets) for targets in wings.values())
        print(f"{len(wings)} wings, {arrows} arrows between them")
        for chain in wing_circles:
            print("wing cycle: " + " -> ".join(chain))
        print(f"{len(strongly_connected(wings))} circle(s) of wings importing each other")
        upward = upward_imports(graph)
        for source, target in upward:
            print(f"upward import: {source} -> {target} ({wing_of(target)} is above {wing_of(source)} in WING_ORDER)")
        print(f"{len(upward)} upward import(s) against the wing order")
    return 1 if cycles or private or wing_circles or upward else 0


if __name__ == "__main__":
    sys.exit(main())
