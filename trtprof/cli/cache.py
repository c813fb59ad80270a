"""trtprof cache ls [DIR] / trtprof cache prune [DIR] [--older-than AGE] [--corrupt] [--model NAME]."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from ..engines.cache_admin import OK, CacheItem, check_cache_dir, parse_age, remove, scan_dir, select
from ..errors import BadInput
from ..util.texttable import grid
from ..util.wording import plural
from ._common import add_common_debug, keeps_runtime_cache


def add_parser(sub) -> None:
    p = sub.add_parser("cache", help="list the engine cache, or prune old/corrupt/orphaned entries",
                       description="Inspect and tidy an engines dir. `ls` verifies every artifact's sha256.")
    csub = p.add_subparsers(dest="cache_command", metavar="ACTION")
    csub.required = True
    ls = csub.add_parser("ls", help="one line per entry: model, precision, backend, effective precision, profile, "
                                    "size, age, ok/corrupt/orphan/temp")
    ls.add_argument("dir", type=Path, nargs="?", default=Path("engines"), help="engines dir (default ./engines)")
    add_common_debug(ls)
    ls.set_defaults(func=run_ls)
    pr = csub.add_parser("prune", help="remove entries matching every filter given (at least one filter)")
    pr.add_argument("dir", type=Path, nargs="?", default=Path("engines"), help="engines dir (default ./engines)")
    pr.add_argument("--older-than", default=None, metavar="AGE", help="last written more than AGE ago: 30m, 12h, 7d, 2w")
    pr.add_argument("--corrupt", action="store_true",
                    help="corrupt entries (bad metadata, missing or changed artifact), orphan artifacts, temp files")
    pr.add_argument("--model", default=None, help="entries of this model (its file stem, as `cache ls` shows)")
    pr.add_argument("--dry-run", action="store_true", help="say what would be removed, remove nothing")
    add_common_debug(pr)
    pr.set_defaults(func=run_prune)
    p.set_defaults(func=lambda args: p.error("say ls or prune"))


LS_HEADERS = ("model", "precision", "backend", "effective", "profile", "status", "file", "size", "age")


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _age(seconds: float) -> str:
    for unit, span in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= span:
            return f"{seconds / span:.1f}{unit}"
    return f"{seconds:.0f}s"


def _row(item: CacheItem, now: float) -> tuple:
    r = item.record
    if r is not None:
        eff = str(r.backend_metadata.get("effective_precision", r.precision))
        sizes = r.spec.batch_sizes
        profile = (f"{sizes[0]}" if len(sizes) == 1 else f"{min(sizes)}–{max(sizes)}") if sizes else "-"
        opts = ",".join(f"{k}={v}" for k, v in r.spec.options)
        fields = (r.model, r.precision, r.backend, eff, profile + (f" {opts}" if opts else ""))
    else:
        fields = (item.model, "-", "-", "-", "-")
    return (*fields, item.status, item.name, _size(item.size_bytes), _age(item.age_s(now)))


def _scan(root: Path):
    check_cache_dir(root)
    scan = scan_dir(root, verify=True, runtime_caches=keeps_runtime_cache)
    check_cache_dir(root, scan)
    return scan


def _foreign_note(scan) -> str:
    return f"; {plural(len(scan.foreign), 'other file')} not trtprof's, left alone" if scan.foreign else ""


def run_ls(args: argparse.Namespace) -> int:
    scan = _scan(args.dir)
    if not scan.items:
        print(f"{args.dir}: empty")
        return 0
    now = time.time()
    # names and words left-aligned, sizes and ages right; the status column holds one word and each
    # problem goes on a line of its own under the table (a long problem would widen every row)
    print("\n".join(grid(LS_HEADERS, [_row(i, now) for i in scan.items], left=LS_HEADERS.index("size"))))
    for item in scan.items:
        if item.status != OK:
            print(f"{item.status}: {item.name}: {item.problem}")
    counts = {s: sum(1 for i in scan.items if i.status == s) for s in ("ok", "corrupt", "orphan", "temp")}
    total = sum(i.size_bytes for i in scan.items)
    print(f"{plural(len(scan.items), 'item')}, {_size(total)}: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
          + _foreign_note(scan))
    return 0


def run_prune(args: argparse.Namespace) -> int:
    if args.older_than is None and not args.corrupt and args.model is None:
        raise BadInput("prune: give at least one of --older-than, --corrupt, --model (nothing is pruned by default)")
    older = parse_age(args.older_than) if args.older_than is not None else None
    scan = _scan(args.dir)
    chosen = select(scan, older_than_s=older, corrupt=args.corrupt, model=args.model)
    removed = busy = 0
    for item in chosen:
        if args.dry_run:
            print(f"would remove {item.status}: {', '.join(str(f) for f in item.files)}")
            continue
        if remove(args.dir, item):
            removed += 1
            print(f"removed {item.status}: {', '.join(str(f) for f in item.files)}")
        else:
            busy += 1
            print(f"kept (a build holds its lock now): {item.name}")
    verb = "would remove" if args.dry_run else "removed"
    print(f"{verb} {len(chosen) if args.dry_run else removed} of {plural(len(scan.items), 'item')}"
          + (f"; {busy} busy" if busy else "") + _foreign_note(scan))
    return 0
