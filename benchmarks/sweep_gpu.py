"""The issue-14 sweep on a 2-GPU host: ResNet-50 and the Conv2D+ELU net, fp32/tf32/fp16, batch 1/64/256.

In one run, side by side: the same sweep (``trtprof sweep``, local executor, torch backend) on one
GPU (``--gpus 0``) and on both (``--gpus all``), printing the wall-time ratio; then
``benchmarks/sweep_interference.py`` (ResNet-50 batch 64 alone / beside a busy neighbour on the other
GPU / alone again); the two-GPU sweep re-merged with those figures; ``trtprof report`` of it.

The engines are built once before both sweeps (``trtprof build`` of each model), so both sweeps' own
pre-build steps are cache hits and the ratio compares the cells, not who paid for the first build.
Models are exported on the machine with torch/torchvision (``benchmarks/gpu_fidelity.py``).

    python3 benchmarks/sweep_gpu.py --out-dir $OUT/sweep_gpu --time-budget-s 3
    python3 benchmarks/sweep_gpu.py --out-dir $OUT/sweep_ray --only-ray --skip-interference   # Ray only

``--ray`` adds the two-GPU sweep through ``--executor ray`` (Ray started locally by ``trtprof sweep``,
one task per cell with ``num_gpus=1``). Ray is not on the GPU machine and its wheel is over one call's
transfer limit: see ``benchmarks/ray_on_device.md``.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def trtprof(*args: str, log: Path | None = None) -> int:
    cmd = [sys.executable, "-m", "trtprof", *args]
    print("$ trtprof " + " ".join(args), flush=True)
    t0 = time.perf_counter()
    with open(log, "a") if log else open("/dev/null", "w") as fh:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        fh.write(proc.stdout)
    print(proc.stdout, end="", flush=True)
    print(f"[exit {proc.returncode}, {time.perf_counter() - t0:.1f} s]", flush=True)
    return proc.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp/sweep_gpu"))
    ap.add_argument("--time-budget-s", default="3")
    ap.add_argument("--batch-sizes", default="1,64,256")
    ap.add_argument("--precisions", default="fp32,tf32,fp16")
    ap.add_argument("--skip-interference", action="store_true")
    ap.add_argument("--only-interference", action="store_true",
                    help="export + build, then only the interference benchmark (no sweeps)")
    ap.add_argument("--finish-interference", action="store_true",
                    help="only the 'alone again' phase of an interference run a time limit cut (its partial file in --out-dir)")
    ap.add_argument("--ray", action="store_true",
                    help="also run the two-GPU sweep with --executor ray (a local Ray started by trtprof sweep)")
    ap.add_argument("--runs", default=None, metavar="one_gpu,two_gpus,ray",
                    help="which sweeps this call runs (a sweep an earlier call left in --work counts for the ratio)")
    ap.add_argument("--only-ray", action="store_true", help="of the sweeps, only the Ray one (implies --ray)")
    ap.add_argument("--ray-gpu-types", default=None, metavar="H200",
                    help="pass --gpu-types to the Ray sweep (Ray's accelerator_type resources)")
    ap.add_argument("--cpu-dry-run", action="store_true",
                    help="check this script on a CPU: two small demo models on onnxruntime, 1 vs 2 CPU workers")
    args = ap.parse_args(argv)

    out, work = args.out_dir, args.work
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    log = out / "sweep_gpu.log"
    if args.cpu_dry_run:
        from trtprof.model.demo import make_demo_model

        models = [make_demo_model(work / "a.onnx", channels=8, image=16, classes=10),
                  make_demo_model(work / "b.onnx", channels=4, image=8, classes=5)]
        backend, runs, device = "onnxruntime", (("one_gpu", ["--gpus", "none"]), ("two_gpus", ["--gpus", "none", "--workers", "2"])), "cpu"
    else:
        from gpu_fidelity import MAKERS

        # exported once per machine: a later call on the same warm machine reuses them (same hashes, cache hits)
        models = [p if p.is_file() else MAKERS[p.stem](p)
                  for p in (work / "resnet50.onnx", work / "report_conv_elu_k32_256.onnx")]
        backend, runs, device = "torch", (("one_gpu", ["--gpus", "0"]), ("two_gpus", ["--gpus", "all"])), "gpu"
    spec = work / "sweep.toml"
    spec.write_text(
        f"[sweep]\nkind = \"compare\"\nbackend = \"{backend}\"\n"
        f"precisions = {json.dumps(args.precisions.split(','))}\n"
        f"batch_sizes = {json.dumps([int(b) for b in args.batch_sizes.split(',')])}\n"
        f"time_budget_s = {float(args.time_budget_s)}\nengines = \"{work / 'engines'}\"\n\n"
        + "".join(f"[[models]]\npath = \"{m}\"\n\n" for m in models))
    (out / "sweep.toml").write_text(spec.read_text())
    # Pre-build outside the timed sweeps: the same build argv the sweep uses, so they are cache hits.
    from trtprof.sweep.spec import load_spec

    firsts = {tuple(c.build_argv()): c for c in load_spec(spec).cells()}
    for argv_ in firsts:
        if trtprof(*argv_, log=log) != 0:
            return 1
    ray_run = ("ray", ["--executor", "ray"] + (["--gpu-types", args.ray_gpu_types] if args.ray_gpu_types else []))
    every = dict(runs + (ray_run,))
    if args.runs:
        chosen = args.runs.split(",")
    else:
        chosen = ["ray"] if args.only_ray else [name for name, _ in runs] + (["ray"] if args.ray else [])
    if args.only_interference:
        chosen = []
    walls = {}
    for name in chosen:
        rc = trtprof("sweep", str(spec), *every[name], "--out", str(work / name), log=log)
        merged = json.loads((work / name / "sweep.json").read_text())
        walls[name] = merged["executor"]["run_wall_s"]
        print(f"{name}: rc {rc}, {merged['cells_ok']}/{merged['cells_total']} ok, wall {walls[name]:.1f} s", flush=True)
        # keep each sweep as soon as it ends: a later step cut off by a time limit must not lose it
        subprocess.run(["tar", "czf", str(out / f"sweep_{name}.tgz"), "-C", str(work), name, "sweep.toml"])
    # a sweep run by an earlier call on the same machine (its work folder survives while the machine is warm)
    earlier = {name: json.loads((work / name / "sweep.json").read_text())["executor"]["run_wall_s"]
               for name in every if name not in walls and (work / name / "sweep.json").is_file()}
    if earlier:
        print(f"earlier calls' sweeps found in {work}: " + ", ".join(f"{k} {v:.1f} s" for k, v in earlier.items()), flush=True)
    walls_all = {**earlier, **walls}
    if "ray" in walls:
        print(f"\nRAY SWEEP: wall {walls['ray']:.1f} s" + (f" (local executor on two GPUs: {walls_all['two_gpus']:.1f} s)"
                                                          if "two_gpus" in walls_all else ""), flush=True)
        (out / "summary_ray.json").write_text(json.dumps({"ray_wall_s": walls["ray"], **(
            {"two_gpus_wall_s": walls_all["two_gpus"]} if "two_gpus" in walls_all else {})}, indent=1) + "\n")
    if "one_gpu" in walls_all and "two_gpus" in walls_all and ("one_gpu" in walls or "two_gpus" in walls):
        ratio = walls_all["one_gpu"] / walls_all["two_gpus"]
        print(f"\nSWEEP WALL TIME: one GPU {walls_all['one_gpu']:.1f} s, two GPUs {walls_all['two_gpus']:.1f} s, "
              f"ratio {ratio:.3f}x (target >= 1.8x)", flush=True)
        order = [name for name in every if name in walls_all]
        summary = {"one_gpu_wall_s": walls_all["one_gpu"], "two_gpus_wall_s": walls_all["two_gpus"], "ratio": ratio,
                   "same_call": "one_gpu" in walls and "two_gpus" in walls,
                   "earlier_call": sorted(earlier), "this_call": list(walls),
                   "engines": "pre-built before the sweeps (cache hits in every sweep)", "runs_found": order}
        (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    interference = out / "sweep_interference.json"
    if not args.skip_interference:
        cmd = [sys.executable, str(ROOT / "benchmarks/sweep_interference.py"), str(models[0]), "--backend", backend,
               "--batch-size", "64", "--precisions", "fp32,fp16", "--time-budget-s", args.time_budget_s, "--device", device,
               "--engines", str(work / "engines"), "--out", str(interference)] + (["--finish"] if args.finish_interference else [])
        print("$ " + " ".join(cmd), flush=True)
        subprocess.run(cmd)
        # re-merge the local two-GPU sweep with the figures (no cell runs again; a resume of the Ray
        # sweep would start Ray again)
        if interference.is_file() and "two_gpus" in walls_all:
            trtprof("sweep", str(spec), *every["two_gpus"], "--out", str(work / "two_gpus"), "--resume",
                    "--interference", str(interference), log=log)
            walls.setdefault("two_gpus", walls_all["two_gpus"])
    if not walls:
        return 0
    for name in walls:
        trtprof("report", str(work / name / "sweep.json"), "-o", str(work / name / "report.html"), log=log)
        subprocess.run(["tar", "czf", str(out / f"sweep_{name}.tgz"), "-C", str(work), name, "sweep.toml"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
