"""List the functions of a package longer than a limit (default 80 lines), longest first.

    python tools/long_functions.py                 (trtprof/, over 80 lines)
    python tools/long_functions.py --lines 60 --params 8 --package DIR

The project's style is functions of at most 80 lines; this is the list to work from (and the one a
note must explain for each function left longer). Length is counted from the ``def`` line (its
decorators included) to the function's last line, docstring and comments included, as a reader
scrolls it. ``--params`` also lists functions with more parameters than that. It only lists:
exit status 0, unless ``--fail`` is given and something is listed.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path


def long_functions(package_dir: Path, max_lines: int, max_params: int | None) -> list[tuple[int, int, str]]:
    """(lines, parameters, "path:line name") of every function over either limit."""
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            lines = (node.end_lineno or node.lineno) - first + 1
            arguments = node.args
            params = len(arguments.posonlyargs + arguments.args + arguments.kwonlyargs)
            params += bool(arguments.vararg) + bool(arguments.kwarg)
            if lines > max_lines or (max_params is not None and params > max_params):
                found.append((lines, params, f"{path}:{node.lineno} {node.name}"))
    return sorted(found, reverse=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(__file__).resolve().parent.parent / "trtprof"
    parser.add_argument("--package", type=Path, default=default)
    parser.add_argument("--lines", type=int, default=80, help="list functions longer than this")
    parser.add_argument("--params", type=int, default=None, help="also list functions with more parameters")
    parser.add_argument("--fail", action="store_true", help="exit 1 when anything is listed")
    args = parser.parse_args(argv)
    found = long_functions(args.package, args.lines, args.params)
    for lines, params, where in found:
        print(f"{lines:4d} lines {params:3d} params  {where}")
    print(f"{len(found)} function(s) over {args.lines} lines" + (f" or {args.params} parameters" if args.params else ""))
    return 1 if (args.fail and found) else 0


if __name__ == "__main__":
    sys.exit(main())
