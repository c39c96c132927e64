#!/usr/bin/env bash
# 1,000 short tasks on Slurm, two ways (issue 8's benchmark):
#   inside one allocation: `salloc -n2 slurp tasks.txt`, every task a job step
#   one job per task:      `slurp --backend slurm tasks.txt`, 1,000 sbatch jobs
# and, for scale, the same file run here by slurp without Slurm.
# Needs a Slurm (scripts/local-slurm.sh start) and a release build:
#   cargo build --release && benches/slurm.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}
slurp=$PWD/target/release/slurp
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
for _ in $(seq "$n"); do echo true; done > tasks.txt

now() { date +%s.%N; }
t0=$(now); "$slurp" --backend local --cores 2 tasks.txt >/dev/null 2>&1; t1=$(now)
local_s=$(echo "$t1 - $t0" | bc)
t0=$(now); salloc -n2 "$slurp" tasks.txt >/dev/null 2>&1; t1=$(now)
steps_s=$(echo "$t1 - $t0" | bc)
t0=$(now); "$slurp" --backend slurm tasks.txt >/dev/null 2>&1; t1=$(now)
jobs_s=$(echo "$t1 - $t0" | bc)
printf '%s tasks (true): here %.1f s; inside one allocation (steps) %.1f s; as %s sbatch jobs %.1f s; jobs/steps = %.1fx\n' \
    "$n" "$local_s" "$steps_s" "$n" "$jobs_s" "$(echo "$jobs_s / $steps_s" | bc -l)"
