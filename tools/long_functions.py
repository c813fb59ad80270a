"""List (and with ``--fail``, refuse) functions and modules of a package over the project's size limits.

    python tools/long_functions.py                 (trtprof/: functions over 60 lines or 7 parameters,
                                                    modules over 600 lines; the allow-list applied)
    python tools/long_functions.py --fail          (CI: exit 1 on anything not excused, see below)
    python tools/long_functions.py --lines 80 --params 8 --package DIR --allow FILE

The limits are the project's: a function fits a screen (at most 60 lines, at most 7 parameters; related
parameters travel in the option records the wings already have) and a module stays under 600 lines unless
its docstring says why, in a paragraph that begins ``Why this module is long:``.

Length is counted from the ``def`` line (its decorators included) to the function's last line, docstring
and comments included, as a reader scrolls it; parameters count ``self``/``cls``, ``*args`` and
``**kwargs``. A function is named by its path relative to the package's parent and its qualified name
(``trtprof/cli/compare.py:run``, ``trtprof/backends/torch_runner.py:TorchRunner.__init__``); a module by its path.

The allow-list (default ``tools/long_functions_allow.txt`` for the default package) is a ratchet for code
written before the limits: each line ``NAME lines=N params=P`` excuses one offender at its current size.
``--fail`` exits 1 when a function or module over a limit is not listed, when a listed one grew past its
line, or when a listed one no longer exists or is back within the limits (delete its line: the list can
only shrink). One that shrank but is still over passes, with a note to lower its numbers.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PACKAGE = ROOT / "trtprof"
DEFAULT_ALLOW = ROOT / "tools" / "long_functions_allow.txt"
REASON = "Why this module is long:"


class BadAllowList(Exception):
    """An allow-list that cannot be read: exit 2 with its one-line message."""


@dataclass(frozen=True)
class Offender:
    """A function or module over a limit: ``params`` is 0 for a module."""

    name: str
    lines: int
    params: int
    where: str

    @property
    def is_module(self) -> bool:
        return ":" not in self.name


def _functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, node) of every function in ``tree``, nested ones included."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((prefix + child.name, child))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def _size(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int]:
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    lines = (node.end_lineno or node.lineno) - first + 1
    arguments = node.args
    params = len(arguments.posonlyargs + arguments.args + arguments.kwonlyargs)
    return lines, params + bool(arguments.vararg) + bool(arguments.kwarg)


def offenders(package_dir: Path, max_lines: int, max_params: int, max_module_lines: int) -> list[Offender]:
    """Every function over ``max_lines``/``max_params`` and every module over ``max_module_lines``
    whose docstring does not say why, longest first."""
    found: dict[str, Offender] = {}
    for path in sorted(package_dir.rglob("*.py")):
        relative = path.relative_to(package_dir.parent).as_posix()
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(path))
        module_lines = len(source.splitlines())
        if module_lines > max_module_lines and REASON not in (ast.get_docstring(tree) or ""):
            found[relative] = Offender(relative, module_lines, 0, relative)
        for qualname, node in _functions(tree):
            lines, params = _size(node)
            name = f"{relative}:{qualname}"
            if (lines > max_lines or params > max_params) and (
                name not in found or (lines, params) > (found[name].lines, found[name].params)
            ):
                found[name] = Offender(name, lines, params, f"{relative}:{node.lineno} {qualname}")
    return sorted(found.values(), key=lambda o: (o.lines, o.params, o.name), reverse=True)


def read_allow(path: Path) -> dict[str, tuple[int, int]]:
    """``NAME lines=N params=P`` lines (``#`` comments and blank lines skipped) as {name: (lines, params)}."""
    allowed: dict[str, tuple[int, int]] = {}
    if not path.is_file():
        raise BadAllowList(f"{path}: no such allow-list")
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, *fields = line.split()
        values = dict(field.split("=", 1) for field in fields if "=" in field)
        try:
            allowed[name] = (int(values["lines"]), int(values.get("params", 0)))
        except (KeyError, ValueError):
            raise BadAllowList(f"{path}:{number}: expected 'NAME lines=N params=P', got {raw!r}") from None
    return allowed


def ratchet(found: list[Offender], allowed: dict[str, tuple[int, int]]) -> tuple[list[str], list[str]]:
    """(failures, notes) of ``found`` against the allow-list."""
    failures: list[str] = []
    notes: list[str] = []
    current = {o.name: o for o in found}
    for offender in found:
        if offender.name not in allowed:
            failures.append(f"new offender: {offender.name} ({offender.lines} lines, {offender.params} params)")
            continue
        lines, params = allowed[offender.name]
        if offender.lines > lines or offender.params > params:
            failures.append(
                f"grew: {offender.name} is {offender.lines} lines, {offender.params} params; "
                f"the allow-list lets it be {lines} lines, {params} params"
            )
        elif (offender.lines, offender.params) != (lines, params):
            notes.append(f"shrank: lower {offender.name} to lines={offender.lines} params={offender.params}")
    for name in sorted(set(allowed) - set(current)):
        failures.append(f"stale entry: {name} is gone or within the limits now; delete its allow-list line")
    return failures, notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", type=Path, default=DEFAULT_PACKAGE)
    parser.add_argument("--lines", type=int, default=60, help="functions longer than this (default 60)")
    parser.add_argument("--params", type=int, default=7, help="functions with more parameters (default 7)")
    parser.add_argument("--module-lines", type=int, default=600, help="modules longer than this (default 600)")
    parser.add_argument("--allow", type=Path, default=None, help="allow-list (default: tools/long_functions_allow.txt "
                        "for the default package, none for another)")
    parser.add_argument("--fail", action="store_true", help="exit 1 on a new, grown or stale entry")
    args = parser.parse_args(argv)
    allow_path = args.allow or (DEFAULT_ALLOW if args.package.resolve() == DEFAULT_PACKAGE else None)
    try:
        allowed = read_allow(allow_path) if allow_path else {}
    except BadAllowList as error:
        print(error, file=sys.stderr)
        return 2
    found = offenders(args.package, args.lines, args.params, args.module_lines)
    for offender in found:
        mark = "allowed" if offender.name in allowed else "NEW"
        size = f"{offender.lines:4d} lines" + ("    module" if offender.is_module else f" {offender.params:3d} params")
        print(f"{size}  {mark:7s}  {offender.where}")
    print(f"{len(found)} over {args.lines} lines or {args.params} parameters (functions) or "
          f"{args.module_lines} lines (modules), {sum(o.name in allowed for o in found)} on the allow-list")
    failures, notes = ratchet(found, allowed)
    for note in notes:
        print(f"note: {note}")
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if (args.fail and failures) else 0


if __name__ == "__main__":
    sys.exit(main())
