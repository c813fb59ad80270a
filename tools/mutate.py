#!/usr/bin/env python3
"""A small mutation check: do the tests notice when a threshold, a comparison or a guard changes?

Why a script beside mutmut: this one mutates exactly the kinds of change issue 26 is about
(thresholds, comparisons, guards), runs each mutant in a fresh pytest process on a scratch copy,
and names each survivor by file:line — the table is small enough to act on. mutmut 3.8.1 also
runs on this layout (tried 2026-12-01 on diagnose.py with tests/diagnose/test_diagnose.py: 835 mutants in
about a minute, 582 killed, 252 survived); its wider operator set (arithmetic swaps, string and
dict-key edits, dropped arguments) finds another class of gaps; see tools/mutation-results.md.

Each mutant changes ONE thing in one module (the tree is parsed with ``ast``, one node changed,
the module written back with ``ast.unparse`` into a scratch copy of the repository):

* ``cmp``: a comparison operator flipped (< ↔ <=, > ↔ >=, == ↔ !=, in ↔ not in, is ↔ is not);
* ``const``: a numeric literal changed (an int k → k + 1; a float x → x · 1.1 and x · 0.9; 0.0 → 0.1);
  a module-level named threshold (``NAME = number``) gets both directions, so a test that checks only
  one side of the threshold leaves a survivor;
* ``bool``: True ↔ False, ``and`` ↔ ``or``, ``not x`` → ``x``;
* ``guard``: an ``if`` whose body ends in ``raise``/``return``/``continue`` made never to run
  (its test replaced by ``False``): the removed guard.

Docstrings, other strings, f-strings, annotations, literal parameter defaults (``seed=0``) and
``if TYPE_CHECKING`` blocks are not mutated. A mutant is
*killed* when its test files fail (or time out: ``--timeout``), *survived* when they pass. The test
files per module are ``MODULE_TESTS`` (fast, ``-x -q -p no:cacheprovider -m "not slow"``). Mutants
judged equivalent (no test can tell them apart; the reason is stated) are in ``EQUIVALENT`` and
counted apart from the score.

    PYTHONPATH=. python tools/mutate.py                      # every module, every mutant
    PYTHONPATH=. python tools/mutate.py --module trtprof/engines/cache.py --sample 40 --seed 1
    PYTHONPATH=. python tools/mutate.py --list               # the mutants, nothing run

The result table goes to ``tools/mutation-results.md`` (``--out``). Not part of CI: a full run takes
tens of minutes on two cores.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Module → the test files that own its behaviour (edge tests first: they fail fastest).
MODULE_TESTS: dict[str, tuple[str, ...]] = {
    "trtprof/stats/speedup.py": ("tests/stats/test_edges_speedup.py", "tests/compare/test_compare.py"),
    "trtprof/engines/cache.py": ("tests/engines/test_edges_cache.py", "tests/engines/test_spec_cache.py", "tests/engines/test_cache_hygiene.py"),
    "trtprof/convert/fp16range.py": ("tests/convert/test_edges_fp16.py", "tests/convert/test_fp16.py"),
    "trtprof/convert/fp16range_records.py": ("tests/convert/test_edges_fp16.py", "tests/convert/test_fp16.py"),
    "trtprof/convert/fp16.py": ("tests/convert/test_edges_fp16.py", "tests/convert/test_fp16.py"),
    "trtprof/diagnose/rules.py": ("tests/diagnose/test_edges_diagnose.py", "tests/diagnose/test_diagnose.py"),
}

# The three slowest tests of test_fp16.py (whole compare runs, 3–6 s each) are left out of the mutation
# run; what they check end to end is covered piecewise by the faster tests of the same file.
_FP16_SLOW = ("tests/convert/test_fp16.py::test_compare_on_a_model_zoo_graph_predicts_its_overflows",
              "tests/convert/test_fp16.py::test_the_prediction_holds_on_a_model_zoo_graph_in_real_fp16_arithmetic",
              "tests/convert/test_fp16.py::test_compare_predicts_the_overflow_cpu_fp16_does_not_show")
DESELECTED: dict[str, tuple[str, ...]] = {"trtprof/convert/fp16range.py": _FP16_SLOW,
                                          "trtprof/convert/fp16range_records.py": _FP16_SLOW,
                                          "trtprof/convert/fp16.py": _FP16_SLOW}

# (module, text, mutation) → why no test can distinguish the mutant from the original. ``text`` is
# found in the mutant's ``text`` (its source line, then ⟨the mutated node⟩), so a moved line still matches.
_GRID = "KDE grid of 512 ± 1 points moves a mode by < 0.2 % of the range; no rule depends on the count"
_KDE_CAP = "subsample cap 4000 ± 1: above it a seeded subsample replaces the samples, which changes nothing but noise"
EQUIVALENT: dict[tuple[str, str, str], str] = {
    ("trtprof/stats/speedup.py", "KDE_MAX_SAMPLES = 4000", "4000 → 4001"): _KDE_CAP,
    ("trtprof/stats/speedup.py", "KDE_MAX_SAMPLES = 4000", "4000 → 3999"): _KDE_CAP,
    ("trtprof/stats/speedup.py", "KDE_GRID = 512", "512 → 513"): _GRID,
    ("trtprof/stats/speedup.py", "KDE_GRID = 512", "512 → 511"): _GRID,
    ("trtprof/stats/speedup.py", "if peaks.size == 0:", "guard `if …: return` removed (test → False)"): "find_peaks on the zero-padded density always finds its global maximum, which holds far more than MODE_MIN_MASS: the guard is defensive and cannot fire",
    ("trtprof/stats/speedup.py", "np.percentile(x, (0.5, 99.5))", "0.5 → 0.45"): "the KDE's core: the central 99 % vs 99.05 % of the samples; the mode rules' margins (10 % prominence, 5 % mass) are far wider than that",
    ("trtprof/stats/speedup.py", "peaks = peaks[mass >= MODE_MIN_MASS]", "`>=` → `>`"): "differs only for a mode holding exactly 5.000 % of the core samples",
    ("trtprof/convert/fp16range.py", "np.shape(v)[0] > max_batch for v in feeds.values()", "`>` → `>=`"): "cutting a batch of exactly max_batch samples to its first max_batch samples leaves it as it was",
    ("trtprof/engines/cache.py", "LOCK_TIMEOUT_S = 3600", "3600 → 3599"): "the lock timeout (an hour) is only observable by waiting an hour for a held lock",
    ("trtprof/engines/cache.py", "LOCK_TIMEOUT_S = 3600", "3600 → 3601"): "the lock timeout (an hour) is only observable by waiting an hour for a held lock",
    ("trtprof/engines/cache.py", "mask = os.umask(0)", "0 → 1"): "os.umask(x) returns the previous mask whatever x is, and the next line restores it",
    ("trtprof/engines/cache.py", "root_cause = err.__cause__ if", "`and` → `or`"): "differs only for an error that is not trtprof's yet has a __cause__; root.mkdir's OSError has none",
    ("trtprof/engines/cache.py", "if not self.root.is_dir():", "guard `if …: return` removed (test → False)"): "Path.glob of a missing folder yields nothing: the guard only saves the glob",
    ("trtprof/convert/fp16range.py", "options.log_severity_level = 3", "3 → 4"): "ONNX Runtime's own log level (3: errors, 4: fatal only): the analysis and its result are the same",
    ("trtprof/convert/fp16.py", 'if node.op_type == "Constant":', "`==` → `!=`"): "ONNX shape inference already types every Constant output; the attribute loop is the fallback for a model inference rejects, and on the other ops it reads (a ConstantOfShape's value) it gives the type inference gives",
    ("trtprof/diagnose/rules.py", "precision = series[0].precision", "0 → 1"): "a series is one precision's results (the caller groups them so): any member's precision is the first's",
    ("trtprof/diagnose/rules.py", "leaf = path.rsplit(\".\", 1)[-1].lower()", "1 → 2"): "rsplit('.', 2)[-1] is the same last component as rsplit('.', 1)[-1] (the line's other 1, [-1] → [-2], reads the wrong component and is killed by the clock tests)",
    ("trtprof/convert/fp16range.py", "⟨keep > 1⟩", "`>` → `>=`"): "`keep >= 1` differs from `keep > 1` only when one tensor still needs more runs than allowed, i.e. max_runs < 1, which no caller passes",
    ("trtprof/engines/cache.py", "if not self.root.is_dir(): ⟨", "guard `if …: return` removed (test → False)"): "Path.glob of a missing folder yields nothing: the guard only saves the glob",
    ("trtprof/convert/fp16range.py", "kept = data if data.samples <= MAX_SAMPLES", "`<=` → `<`"): "differs only for exactly MAX_SAMPLES samples, whose first MAX_SAMPLES are all of them: the same arrays, the same batches (the copy's label is not returned; 512 vs 513 samples is tested)",
    ("trtprof/convert/fp16range.py", "if f.covered or budget <= 0 or", "`<=` → `<`"): "MAX_CHECKED = 1 + 2 × FINDINGS_SHOWN: the budget reaches 0 only after the combined keep-list and every printed finding of both kinds were built, so a finding met at budget 0 is never printed and `< 0` skips nothing more (the budget's last build is tested)",
    ("trtprof/convert/fp16range.py", "batch = int(np.shape(next(iter(feeds.values())))[0]) if feeds else 1", "1 → 2"): "feeds are empty only for a model without inputs, and --inputs data always holds an array (InputData refuses none) whose name such a model lacks (data.check refuses it): with data, feeds are never empty",
    ("trtprof/convert/fp16range_records.py", 'if predicted.get("skipped"):', "guard `if …: return` removed (test → False)"): "a skipped analysis' JSON has no findings (RangeAnalysis(skipped=…) is the only place a skip is made), so the code after the guard also returns [summary]",
}

# The hand mutations issue 26 found surviving, as text edits: each is run beside the sampled mutants
# (kind "hand") so the table shows that a test now kills it. (module, label, original text, mutated text)
HAND: tuple[tuple[str, str, str, str], ...] = (
    ("trtprof/stats/speedup.py", "t quantile 0.975 → 0.95", "special.stdtrit(max(df, 1), 0.5 + confidence / 2)",
     "special.stdtrit(max(df, 1), confidence)"),
    ("trtprof/convert/fp16range_records.py", "overflow at 2 × 65520", "if t.max_abs >= FP16_INF_FROM]", "if t.max_abs >= 2 * FP16_INF_FROM]"),
    ("trtprof/convert/fp16range_records.py", "underflow at 2⁻¹⁴", "np.count_nonzero(nonzero <= FP16_ZERO_UPTO)",
     "np.count_nonzero(nonzero <= FP16_MIN_NORMAL)"),
    ("trtprof/engines/cache.py", "the schema check skipped", 'if data.get("schema") != CACHE_SCHEMA:', "if False:"),
    ("trtprof/engines/cache.py", "an empty artifact accepted", "if not tmp.is_file() or tmp.stat().st_size == 0:",
     "if not tmp.is_file():"),
    ("trtprof/engines/cache.py", "`/` in an artifact name", 'and "/" not in record.artifact ', ""),
    ("trtprof/diagnose/rules.py", "FIXED_SHARE 0.8", "FIXED_SHARE = 0.5", "FIXED_SHARE = 0.8"),
    ("trtprof/diagnose/rules.py", "the host gate removed", "if _host_heavy(result, HOST_SHARE):", "if False:"),
)

def equivalent_because(m: "Mutant") -> str | None:
    return next((why for (module, text, what), why in EQUIVALENT.items()
                 if module == m.module and what == m.description and text in m.text), None)


CMP_FLIPS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
             ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
CMP_TEXT = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
            ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}


@dataclass(frozen=True)
class Mutant:
    module: str
    index: int  # position of the node in the module's ast.walk order (stable for one source)
    line: int
    kind: str
    description: str
    variant: int = 0  # which of a node's mutations
    text: str = ""  # the source line, then ⟨the mutated node⟩: what EQUIVALENT matches (lines move)


def _skipped_nodes(tree: ast.AST) -> set[int]:
    """ids of nodes never mutated: docstrings, annotations, TYPE_CHECKING blocks, f-string parts."""
    skip: set[int] = set()

    def mark(node: ast.AST | None) -> None:
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                mark(first)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            mark(node.returns)
            for arg in [*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs, node.args.vararg, node.args.kwarg]:
                if arg is not None:
                    mark(arg.annotation)
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if isinstance(default, ast.Constant):
                    mark(default)  # a literal default (seed=0): callers pass their own; not a threshold
        if isinstance(node, ast.AnnAssign):
            mark(node.annotation)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            mark(node)
        if isinstance(node, ast.JoinedStr):
            mark(node)  # message text: a changed format spec is not behaviour the mutation check is about
    return skip


def _module_constants(tree: ast.Module) -> set[int]:
    """ids of the number literals that are module-level named constants (``NAME = 0.5``)."""
    out = set()
    for stmt in tree.body:
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        if value is not None:
            for n in ast.walk(value):
                if isinstance(n, ast.Constant) and _is_number(n.value):
                    out.add(id(n))
    return out


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _new_numbers(value: object, named: bool) -> list[float]:
    assert isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(value, int):
        return [value + 1, value - 1] if named else [value + 1]
    if value == 0.0:
        return [0.1]
    return [value * 1.1, value * 0.9]


def _guard_ends(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Raise, ast.Return, ast.Continue))


def mutations_of(node: ast.AST, named: bool) -> list[tuple[str, str]]:
    """(kind, description) of each mutation of ``node``; the order is the variant number."""
    if isinstance(node, ast.Compare):
        return [("cmp", f"`{CMP_TEXT[type(op)]}` → `{CMP_TEXT[CMP_FLIPS[type(op)]]}`")
                for op in node.ops if type(op) in CMP_FLIPS]
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return [("bool", f"{node.value} → {not node.value}")]
    if isinstance(node, ast.Constant) and _is_number(node.value):
        return [("const", f"{node.value!r} → {new!r}") for new in _new_numbers(node.value, named)]
    if isinstance(node, ast.BoolOp):
        a, b = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        return [("bool", f"`{a}` → `{b}`")]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return [("bool", "`not x` → `x`")]
    if isinstance(node, ast.If) and _guard_ends(node.body):
        what = type(node.body[-1]).__name__.lower()
        return [("guard", f"guard `if …: {what}` removed (test → False)")]
    return []


def apply(node: ast.AST, variant: int, named: bool) -> None:
    """Mutate ``node`` in place (a deep copy of the tree)."""
    if isinstance(node, ast.Compare):
        flippable = [i for i, op in enumerate(node.ops) if type(op) in CMP_FLIPS]
        i = flippable[variant]
        node.ops[i] = CMP_FLIPS[type(node.ops[i])]()
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        node.value = not node.value
    elif isinstance(node, ast.Constant):
        node.value = _new_numbers(node.value, named)[variant]
    elif isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif isinstance(node, ast.UnaryOp):
        node.op = ast.UAdd()  # marked; mutated_source replaces the node by its operand
    elif isinstance(node, ast.If):
        node.test = ast.Constant(value=False)


def enumerate_mutants(module: str) -> list[Mutant]:
    source = (ROOT / module).read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    skip, named = _skipped_nodes(tree), _module_constants(tree)
    out = []
    for index, node in enumerate(ast.walk(tree)):
        if id(node) in skip:
            continue
        line = getattr(node, "lineno", 0)
        node_text = (ast.unparse(node).splitlines() or [""])[0]
        where = f"{lines[line - 1].strip() if line else ''} ⟨{node_text}⟩"
        for variant, (kind, text) in enumerate(mutations_of(node, id(node) in named)):
            out.append(Mutant(module, index, line, kind, text, variant, where))
    return out


def _not_in_place(tree: ast.Module) -> ast.Module:
    """``not x`` mutated to ``+x`` breaks on non-numbers; replace such nodes by their operand."""
    class Unwrap(ast.NodeTransformer):
        def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
            self.generic_visit(node)
            return node.operand if isinstance(node.op, ast.UAdd) and getattr(node, "_mutated", False) else node
    return Unwrap().visit(tree)


def hand_mutants(module: str) -> list[Mutant]:
    text = (ROOT / module).read_text()
    out = []
    for k, (where, label, old, _) in enumerate(HAND):
        if where == module:
            if text.count(old) != 1:
                raise SystemExit(f"{module}: hand mutation {label!r} no longer applies (its text moved)")
            out.append(Mutant(module, -1 - k, text[: text.index(old)].count("\n") + 1, "hand", label))
    return out


def mutated_source(m: Mutant) -> str:
    if m.kind == "hand":
        _, _, old, new = HAND[-1 - m.index]
        return (ROOT / m.module).read_text().replace(old, new)
    tree = ast.parse((ROOT / m.module).read_text())
    named = _module_constants(tree)
    nodes = list(ast.walk(tree))
    node = nodes[m.index]
    apply(node, m.variant, id(node) in named)
    if isinstance(node, ast.UnaryOp):
        node._mutated = True  # type: ignore[attr-defined]
        tree = _not_in_place(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n"


def scratch_copy() -> Path:
    """The package, its tests and the pytest config in a temp folder that mutants are written into."""
    where = Path(tempfile.mkdtemp(prefix="trtprof-mutate-"))
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    shutil.copytree(ROOT / "trtprof", where / "trtprof", ignore=ignore)
    shutil.copytree(ROOT / "tests", where / "tests", ignore=ignore)
    for name in ("setup.cfg", "pyproject.toml", "conftest.py"):
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, where / name)
    return where


def run_tests(where: Path, module: str, timeout: float) -> tuple[str, float]:
    env = {**os.environ, "PYTHONPATH": str(where), "PYTHONDONTWRITEBYTECODE": "1"}
    deselect = [arg for test in DESELECTED.get(module, ()) for arg in ("--deselect", test)]
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", "not slow", *deselect,
           *MODULE_TESTS[module]]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=where, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - t0
    return ("survived" if proc.returncode == 0 else "killed" if proc.returncode == 1 else f"error rc={proc.returncode}"), \
        time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--module", action="append", help="module path (repeatable); default: all of MODULE_TESTS")
    ap.add_argument("--sample", type=int, default=0, help="at most this many mutants per module (seeded sample)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per mutant; a timeout counts as killed")
    ap.add_argument("--out", type=Path, default=ROOT / "tools" / "mutation-results.md")
    ap.add_argument("--line", type=int, action="append", help="only the mutants on this line (repeatable; with --module)")
    ap.add_argument("--hand-only", action="store_true", help="only the issue's hand mutations (HAND)")
    ap.add_argument("--list", action="store_true", help="print the mutants and stop")
    ap.add_argument("--raw", type=Path, help="also write the raw results here (JSON), for --combine")
    ap.add_argument("--combine", type=Path, nargs="+", help="write one table from raw results of runs made "
                    "side by side (e.g. one per module group), running nothing")
    args = ap.parse_args(argv)
    if args.combine:
        return combine(args.combine, args.out)
    modules = args.module or list(MODULE_TESTS)
    plan: dict[str, list[Mutant]] = {}
    totals: dict[str, int] = {}
    for module in modules:
        mutants = enumerate_mutants(module)
        totals[module] = 0 if args.hand_only else len(mutants)
        if args.line:
            mutants = [m for m in mutants if m.line in args.line]
        if args.hand_only:
            mutants = []
        if args.sample and len(mutants) > args.sample:
            mutants = sorted(random.Random(args.seed).sample(mutants, args.sample), key=lambda m: (m.line, m.index))
        plan[module] = mutants + [h for h in hand_mutants(module) if not args.line or h.line in args.line]
    if args.list:
        for module, mutants in plan.items():
            for m in mutants:
                print(f"{module}:{m.line}\t{m.kind}\t{m.description}")
        print(f"{sum(len(v) for v in plan.values())} mutants", file=sys.stderr)
        return 0
    code = code_version()
    where = scratch_copy()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the scratch copy is removed
    started = time.time()
    results: list[tuple[Mutant, str, float]] = []
    try:
        for module, mutants in plan.items():
            original = (where / module).read_text()
            status, seconds = run_tests(where, module, args.timeout)
            if status != "survived":
                raise SystemExit(f"{module}: its tests fail without any mutant ({status}); fix them first")
            for k, m in enumerate(mutants, 1):
                (where / module).write_text(mutated_source(m))
                status, seconds = run_tests(where, module, args.timeout)
                (where / module).write_text(original)
                results.append((m, status, seconds))
                print(f"[{k}/{len(mutants)}] {module}:{m.line} {m.kind} {m.description}: {status} ({seconds:.1f} s)",
                      flush=True)
    finally:
        shutil.rmtree(where, ignore_errors=True)
    wall_s = time.time() - started
    if args.raw:
        args.raw.write_text(json.dumps({"totals": totals, "sample": args.sample, "seed": args.seed, "code": code,
                                        "timeout": args.timeout, "wall_s": wall_s,
                                        "results": [[asdict(m), status, secs] for m, status, secs in results]}))
    write_table(args.out, results, totals, args.sample, args.seed, args.timeout, wall_s, code=code)
    return 0


def code_version() -> str:
    """The commit the mutated code came from (and whether trtprof/ or tests/ had uncommitted edits)."""
    def git(*cmd: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *cmd], capture_output=True, text=True).stdout.strip()

    dirty = git("status", "--porcelain", "--", "trtprof", "tests")
    return git("rev-parse", "--short", "HEAD") + (" + uncommitted edits" if dirty else "")


def combine(raws: list[Path], out: Path) -> int:
    results: list[tuple[Mutant, str, float]] = []
    totals: dict[str, int] = {}
    runs = [json.loads(p.read_text()) for p in raws]
    # A later run's result for a mutant replaces an earlier one (a re-run after new tests, e.g. with
    # --line); mutants a later run adds to a module an earlier run already sampled are left out, so
    # the table stays one sample.
    latest: dict[tuple[str, int, int, str], tuple[Mutant, str, float]] = {}
    for run in runs:
        seen_modules = {key[0] for key in latest}
        for module, total in run["totals"].items():  # a --hand-only run counts 0: keep the real count
            totals[module] = max(totals.get(module, 0), total)
        for m, status, secs in run["results"]:
            mutant = Mutant(**m)
            key = (mutant.module, mutant.index, mutant.variant, mutant.kind)
            if key in latest or mutant.module not in seen_modules or mutant.kind == "hand":
                latest[key] = (mutant, status, secs)
    results = list(latest.values())
    first = runs[0]
    codes = sorted({r.get("code", "?") for r in runs})
    write_table(out, results, totals, first["sample"], first["seed"], first["timeout"], sum(r["wall_s"] for r in runs),
                side_by_side=len(runs), code=", ".join(codes))
    return 0


MUTMUT_NOTE = """## mutmut, a second view (a brief try, not part of the score)

mutmut 3.8.1 (installed outside the venv for the try; not a project dependency) ran on this layout on
2026-12-01: `trtprof/diagnose/rules.py` with `tests_dir = tests/diagnose/test_edges_diagnose.py` and
`pytest_add_cli_args_test_selection = tests/diagnose/test_diagnose.py` in a `[mutmut]` section of a scratch
copy's setup.cfg, before the last diagnose edge tests: 835 mutants in about a minute (it runs them in
process), 582 killed, 252 survived, 1 without tests. About 100 of its survivors change message text or
dict-key case only; most of the rest are operators this script does not make: arithmetic swaps
(`ENQUEUE_BOUND_RATIO / compute` for `*`, invisible while a test uses compute = 1 ms: that test now
uses 2 ms), dropped arguments (`dtype=None`), neighbouring indices in message text. Working through
them is follow-up work; this table's operators are the ones issue 26 asks about.
"""


def write_table(out: Path, results: list[tuple[Mutant, str, float]], totals: dict[str, int],
                sample: int, seed: int, timeout: float, wall_s: float, side_by_side: int = 1, code: str = "?") -> None:
    lines = ["# Mutation check", "",
             f"`tools/mutate.py`, finished {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} "
             f"cores shared with other work, {wall_s / 60:.1f} min"
             + (f" in all ({side_by_side} runs, some side by side; a module's latest run is the one shown)"
                if side_by_side > 1 else "")
             + f"; sample per module: {sample or 'all'} (seed {seed}, `--sample {sample} --seed {seed}`); "
             f"timeout {timeout:g} s per mutant (a timeout counts as killed).", "",
             f"Code measured: commit {code} (line numbers are that version's).", "",
             "A mutant is killed when its module's test files (below) fail. Equivalent mutants (no behaviour "
             "can tell them apart) are counted apart, with the reason. The sample is a seeded choice among all "
             "mutants of a module (2 shared cores: a full run of all mutants takes hours there).", "",
             f"Reproduce: `PYTHONPATH=. python tools/mutate.py --sample {sample} --seed {seed} --timeout {timeout:g}` "
             "(one table; `--raw`/`--combine` join runs made side by side).", "",
             "| module | mutants (all) | run | killed | survived | equivalent | killed / run | killed / (run − equivalent) "
             "| tests |",
             "|---|---|---|---|---|---|---|---|---|"]
    hand = [(m, s) for m, s, _ in results if m.kind == "hand"]
    results = [r for r in results if r[0].kind != "hand"]
    all_run = all_killed = all_eq = 0
    survivors: list[tuple[Mutant, str | None]] = []
    for module, total in totals.items():
        rows = [(m, s) for m, s, _ in results if m.module == module]
        eq = [(m, s) for m, s in rows if equivalent_because(m) is not None and s == "survived"]
        killed = sum(s not in ("survived",) for _, s in rows)
        surv = [m for m, s in rows if s == "survived"]
        denominator = len(rows) - len(eq)
        rate = f"{killed / denominator:.1%}" if denominator else "–"
        raw = f"{killed / len(rows):.1%}" if rows else "–"
        lines.append(f"| {module} | {total} | {len(rows)} | {killed} | {len(surv) - len(eq)} | {len(eq)} | {raw} | {rate} | "
                     f"{', '.join(MODULE_TESTS[module])}"
                     + (f" (less its {len(DESELECTED[module])} slowest tests)" if module in DESELECTED else "") + " |")
        all_run += len(rows)
        all_killed += killed
        all_eq += len(eq)
        survivors += [(m, equivalent_because(m)) for m in surv]
    rate = f"{all_killed / (all_run - all_eq):.1%}" if all_run - all_eq else "–"
    raw = f"{all_killed / all_run:.1%}" if all_run else "–"
    lines.append(f"| **all** | {sum(totals.values())} | {all_run} | {all_killed} | {all_run - all_killed - all_eq} | "
                 f"{all_eq} | {raw} | **{rate}** | |")
    live = [m for m, why in survivors if why is None]
    lines += ["", f"## Survivors ({len(live)}): mutants no test noticed", "", "| where | kind | mutation |", "|---|---|---|"]
    lines += [f"| {m.module}:{m.line} | {m.kind} | {m.description} |" for m in live]
    lines += ["", f"## Equivalent ({len(survivors) - len(live)}): survived, and no behaviour can tell them apart", "",
              "| where | kind | mutation | why |", "|---|---|---|---|"]
    lines += [f"| {m.module}:{m.line} | {m.kind} | {m.description} | {why} |" for m, why in survivors if why is not None]
    if hand:
        lines += ["", "## The issue's hand mutations (not in the score above)", "",
                  "Issue 26 listed these as surviving the tests of the time; each is run here as a text edit "
                  "(`HAND` in tools/mutate.py).", "", "| where | mutation | result |", "|---|---|---|"]
        lines += [f"| {m.module}:{m.line} | {m.description} | {s} |" for m, s in hand]
    errors = [(m, s) for m, s, _ in results if s not in ("killed", "survived")]
    if errors:
        lines += ["", "## Killed by a timeout or an error (not a test failure)", "",
                  "A timeout is a mutant that hangs a test (e.g. a loop that no longer ends); it counts as killed.", ""]
        lines += [f"- {m.module}:{m.line} {m.kind} {m.description}: {s}" for m, s in errors]
    lines += ["", MUTMUT_NOTE.rstrip()]
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}: {all_killed}/{all_run - all_eq} killed ({rate})")


if __name__ == "__main__":
    sys.exit(main())
