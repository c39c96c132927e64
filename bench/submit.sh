#!/usr/bin/env bash
# A live instance from outside (issue 19): submitting 10,000 tasks over one
# connection (held behind a dependency, so only submission is timed; and
# running as they come), and the latency from a submit to its task's start
# on an idle instance (median of 101). Flux's own API in a one-broker
# instance in the same run, where a Flux is built (scripts/local-flux.sh);
# HyperQueue where `hq` is on PATH (not installable here: PyPI's hyperqueue
# wheel carries no server).
#
#   bench/submit.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
n=${1:-10000}
build_slurp
client=$PWD/bench/submit_client.py
flux_py=$PWD/bench/flux_submit.py
prefix=$(scripts/local-flux.sh prefix 2>/dev/null || true)
work=$(mktemp -d)
trap 'cd /; [ -n "${run:-}" ] && "$slurp" close --run "$work/.slurp/runs/$run" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
held=$(run=$("$slurp" start --cores 2 --output none); python3 "$client" throughput "$work/.slurp/runs/$run/socket" "$n" held; "$slurp" close --wait --run "$work/.slurp/runs/$run" >/dev/null 2>&1 || true)
running=$(run=$("$slurp" start --cores 2 --output none); python3 "$client" throughput "$work/.slurp/runs/$run/socket" "$n"; "$slurp" close --wait --run "$work/.slurp/runs/$run" >/dev/null 2>&1 || true)
lat=$(run=$("$slurp" start --cores 2 --output none); python3 "$client" latency "$work/.slurp/runs/$run/socket" 101; "$slurp" close --wait --run "$work/.slurp/runs/$run" >/dev/null 2>&1 || true)
echo "slurp, one connection, 2-core instance:"
printf '  submit %d tasks (held)      %8s tasks/s\n' "$n" "$held"
printf '  submit %d tasks (running)   %8s tasks/s\n' "$n" "$running"
printf '  submit → start event, idle  %8s ms (median of 101)\n' "${lat% *}"
printf '  submit → task ended (true)  %8s ms\n' "${lat#* }"
if [ -n "$prefix" ] && [ -x "$prefix/bin/flux" ]; then
  export PATH="$prefix/bin:$PATH"
  ft=$(flux start -s1 flux python "$flux_py" throughput "$n")
  fl=$(flux start -s1 flux python "$flux_py" latency 101)
  echo "flux-core $(flux version | awk '/commands/ {print $2}'), its Python API, one-broker instance:"
  printf '  submit %d jobs (held)       %8s jobs/s   slurp held: %sx\n' "$n" "$ft" "$(echo "scale=1; $held / $ft" | bc -l)"
  printf '  submit → start event, idle  %8s ms       slurp: %sx\n' "${fl% *}" "$(echo "scale=3; ${lat% *} / ${fl% *}" | bc -l)"
  printf '  submit → job finished       %8s ms       slurp: %sx\n' "${fl#* }" "$(echo "scale=3; ${lat#* } / ${fl#* }" | bc -l)"
else
  echo "flux: not built (scripts/local-flux.sh build)"
fi
command -v hq >/dev/null && echo "hq: found, not yet measured" || echo "hq: not on PATH"
