#!/usr/bin/env bash
# How long README's first command (`trtprof demo`, dependencies installed) takes on this machine, with the
# machine's load, so that README's figure says both. Each run in a fresh dir (engines built, not cached).
# Usage: benchmarks/demo_time.sh [RUNS]   (prints one line per run; commit the output under results/)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-/work/main/.venv/bin/python}
export PYTHONPATH=$repo
work=$(mktemp -d)
echo "# $(date -u +%FT%TZ) $(uname -n) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# command: trtprof demo --dir <fresh dir>   (git $(git -C "$repo" rev-parse --short HEAD))"
for i in $(seq "${1:-3}"); do
  before=$(cut -d' ' -f1 /proc/loadavg)
  start=$(date +%s.%N)
  "$py" -m trtprof demo --dir "$work/d$i" >/dev/null 2>&1
  end=$(date +%s.%N)
  echo "run $i: $(echo "$end - $start" | bc | xargs printf '%.1f') s; load average (1 min) $before before, $(cut -d' ' -f1 /proc/loadavg) after"
done
rm -rf "$work"
