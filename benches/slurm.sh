#!/usr/bin/env bash
# 1,000 short tasks on Slurm, three ways (issue 8's benchmark), plus slurp
# alone for scale:
#   one batch job, ranks as steps:  sbatch --wait -nC --wrap "slurp tasks.txt"
#   one batch job, direct ranks:    sbatch --wait -nC --wrap "slurp --srun remote tasks.txt"
#   one job per task:               slurp --backend slurm tasks.txt   (N sbatch jobs)
# C is the node's CPU count, so all three may run C tasks at once.
# Needs a Slurm (scripts/local-slurm.sh start) and a release build:
#   cargo build --release && benches/slurm.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}
slurp=$PWD/target/release/slurp
cpus=$(sinfo -h -N -o %c | head -1)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
for _ in $(seq "$n"); do echo true; done > tasks.txt

now() { date +%s.%N; }
took() { echo "$2 - $1" | bc; }
t0=$(now); "$slurp" --backend local --cores "$cpus" tasks.txt >/dev/null 2>&1; t1=$(now)
here=$(took "$t0" "$t1")
t0=$(now); sbatch --wait -n"$cpus" -o /dev/null --wrap "$slurp tasks.txt" >/dev/null; t1=$(now)
steps=$(took "$t0" "$t1")
t0=$(now); sbatch --wait -n"$cpus" -o /dev/null --wrap "$slurp --srun remote tasks.txt" >/dev/null; t1=$(now)
direct=$(took "$t0" "$t1")
t0=$(now); "$slurp" --backend slurm tasks.txt >/dev/null 2>&1; t1=$(now)
jobs=$(took "$t0" "$t1")
printf '%s tasks (true), %s CPUs: slurp alone %.1f s | one job, steps %.1f s | one job, --srun remote %.1f s | %s jobs %.1f s\n' \
    "$n" "$cpus" "$here" "$steps" "$direct" "$n" "$jobs"
printf 'jobs / steps = %.1fx, jobs / direct = %.0fx\n' "$(echo "$jobs / $steps" | bc -l)" "$(echo "$jobs / $direct" | bc -l)"
