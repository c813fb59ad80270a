"""No module of trtprof outside ``backends/`` and ``cli/`` spells a backend's name in a string (issue 41 #1).

Code above the backends asks what a backend or runner *can do* (``backends.capabilities(name)``, the members of
``backends.base``) or takes the name from the engine record or the backend itself, never what it is called: a
plugin backend then works everywhere a built-in one does. Every string constant of every module outside
``backends/`` and ``cli/`` that equals a registered backend name is listed with file:line.

Some of those strings are the names of Python packages and modules that happen to be spelled like a backend
(``onnxruntime``, ``torch``, ``tensorrt``): what to install or import, not which backend. They are recognised by
where they stand, nothing else:
- the package and the extra of a ``MissingDependency(package, extra)`` (what to ``pip install``);
- a tuple assigned to a name ending in ``PACKAGES`` (``system.environment.PACKAGES``: installed versions);
- the key of a version record, ``{"torch": torch.__version__}`` (the version of that package);
- what an exception's ``.name`` is compared with (``ImportError.name``: the module that failed to import).
"""
from __future__ import annotations

import ast
from pathlib import Path

from trtprof import backends

PACKAGE = Path(__file__).resolve().parents[2] / "trtprof"
ALLOWED_WINGS = ("backends", "cli")  # the backends themselves, and the command line the user types names into


def _missing_dependency_args(node: ast.AST) -> list[ast.AST]:
    if not (isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute))):
        return []
    called = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
    if called != "MissingDependency":
        return []
    return [*node.args[:2], *(k.value for k in node.keywords if k.arg in ("package", "extra"))]


def _packages_tuple(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, (ast.Tuple, ast.List)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(t, ast.Name) and t.id.endswith("PACKAGES") for t in targets):
            return list(node.value.elts)
    return []


def _version_keys(node: ast.AST) -> list[ast.AST]:
    if not isinstance(node, ast.Dict):
        return []
    return [k for k, v in zip(node.keys, node.values)
            if k is not None and isinstance(v, ast.Attribute) and v.attr == "__version__"]


def _import_error_names(node: ast.AST) -> list[ast.AST]:
    if not (isinstance(node, ast.ExceptHandler) and node.name):
        return []
    out: list[ast.AST] = []
    for inner in (n for stmt in node.body for n in ast.walk(stmt)):
        if isinstance(inner, ast.Compare):
            sides = [inner.left, *inner.comparators]
            if any(isinstance(s, ast.Attribute) and s.attr == "name" and isinstance(s.value, ast.Name)
                   and s.value.id == node.name for s in sides):
                out.extend(sides)
    return out


def package_names(tree: ast.AST) -> set[int]:
    """The ids of the string constants of ``tree`` that stand where a package or module name goes (module doc)."""
    return {id(n) for node in ast.walk(tree)
            for n in (*_missing_dependency_args(node), *_packages_tuple(node), *_version_keys(node),
                      *_import_error_names(node))}


def spelled_names(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every string constant of ``source`` equal to one of ``names``, package names excepted."""
    tree = ast.parse(source)
    packages = package_names(tree)
    return sorted((n.lineno, n.value) for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names
                  and id(n) not in packages)


def modules_outside() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py"))
            if p.relative_to(PACKAGE).parts[0] not in ALLOWED_WINGS]


def test_no_module_outside_backends_and_cli_spells_a_backend_name():
    names = set(backends.names())
    assert {"onnxruntime", "onnxruntime-cuda", "torch", "tensorrt", "tensorrt-rtx"} <= names
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}: {name!r}"
             for path in modules_outside() for line, name in spelled_names(path.read_text(encoding="utf-8"), names)]
    assert not found, ("a backend's name spelled outside backends/ and cli/ (ask its capabilities, or take the name "
                       "from the record or the backend):\n" + "\n".join(found))


def test_the_scan_covers_the_wings_and_skips_only_backends_and_cli():
    wings = {p.relative_to(PACKAGE).parts[0] for p in modules_outside()}
    assert {"layers", "measure", "engines", "sweep", "train", "compare"} <= wings
    assert not wings & set(ALLOWED_WINGS)


NAMES = {"torch", "tensorrt", "onnxruntime", "tensorrt-rtx"}


def test_a_backend_name_is_found_wherever_it_stands():
    source = ('LABEL = "tensorrt"\n'
              'def f(r):\n'
              '    return r.backend == "torch" or {"tensorrt-rtx": 1}\n'
              'x = ("onnxruntime",)\n'
              'y = "torchvision", "trtexec", "Torch"\n')
    assert spelled_names(source, NAMES) == [(1, "tensorrt"), (3, "tensorrt-rtx"), (3, "torch"), (4, "onnxruntime")]


def test_package_names_are_not_backend_names():
    source = ('PACKAGES = ("onnxruntime", "torch")\n'
              'RUNTIME_PACKAGES: tuple = ("tensorrt", "tensorrt-rtx")\n'
              'raise MissingDependency("onnxruntime", "torch", why="x")\n'
              'raise MissingDependency(package="torch", extra="tensorrt")\n'
              'v = {"torch": torch.__version__}\n'
              'try:\n'
              '    import x\n'
              'except ImportError as err:\n'
              '    if err.name != "torch":\n'
              '        raise\n')
    assert spelled_names(source, NAMES) == []


def test_the_package_places_are_exact():
    """Only the place itself is excused: the third argument of MissingDependency, another tuple, a dict value, a
    key whose value is not a version, a comparison with another object's ``.name`` are all still found."""
    source = ('raise MissingDependency("onnx", None, why="torch")\n'
              'BACKENDS = ("torch",)\n'
              'v = {"torch": torch.version, "k": "tensorrt"}\n'
              'try:\n'
              '    import x\n'
              'except ImportError as err:\n'
              '    if runner.name == "onnxruntime":\n'
              '        raise\n'
              'if err.name == "tensorrt-rtx":\n'
              '    pass\n')
    assert spelled_names(source, NAMES) == [(1, "torch"), (2, "torch"), (3, "tensorrt"), (3, "torch"),
                                            (7, "onnxruntime"), (9, "tensorrt-rtx")]
