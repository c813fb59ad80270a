#!/usr/bin/env bash
# Is the compare that `trtprof demo` suggests decisive at its default budget on this (busy or quiet) CPU?
# Runs the demo once in a fresh dir, then the exact compare line it prints RUNS times (default 10), each
# with the load average before and after and the verdict line; ends with the count of decisive verdicts
# (FASTER, SLOWER or EQUIVALENT; INCONCLUSIVE is not). Issue 44 item 7: >= 9 of 10 decisive.
# Usage: benchmarks/demo_decisive_cpu.sh [RUNS]   (commit the output under results/)
# From a snapshot (git archive REV | tar -x), not a repo: TRTPROF_REV=REV names the commit it holds.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-/work/main/.venv/bin/python}
export PYTHONPATH=$repo
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
echo "# $(date -u +%FT%TZ) $(uname -n) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
"$py" -m trtprof demo --dir "$work/demo" >"$work/demo.log" 2>&1
suggested=$(grep -m1 '? trtprof compare ' "$work/demo.log" | sed 's/^.*? trtprof compare /compare /')
rev=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo "${TRTPROF_REV:-unknown}")
echo "# git $rev; the demo suggests: trtprof ${suggested//$work/<dir>}"
decisive=0
runs=${1:-10}
for i in $(seq "$runs"); do
  before=$(cut -d' ' -f1-3 /proc/loadavg)
  start=$(date +%s.%N)
  # shellcheck disable=SC2086  # the suggested line is split into its arguments on purpose
  "$py" -m trtprof $suggested --out "$work/c$i.json" >"$work/c$i.log" 2>&1 || true
  end=$(date +%s.%N)
  verdict=$(grep -m1 -E '^batch [0-9]+: [a-z0-9]+ vs [a-z0-9]+: ' "$work/c$i.log" || echo "no verdict line (rc != 0?)")
  echo "run $i: $(echo "$end - $start" | bc | xargs printf '%.1f') s; load average $before before, $(cut -d' ' -f1-3 /proc/loadavg) after; $verdict"
  if echo "$verdict" | grep -qE ' (FASTER|SLOWER|EQUIVALENT) '; then decisive=$((decisive + 1)); fi
done
echo "decisive: $decisive of $runs"
