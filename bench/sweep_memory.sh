#!/usr/bin/env bash
# What a huge sweep costs: `slurp check` of a 10^9-member sweep (time, peak
# RSS), and real runs of sweeps of `true` at two sizes (peak RSS, journal
# size): memory should not grow with the sweep.
#
#   bench/sweep_memory.sh [SMALL] [LARGE]     (defaults: 100000 1000000)
#
# The large run takes minutes on two cores (it runs every task).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
small=${1:-100000}
large=${2:-1000000}
build_slurp
scratch
cd "$work"
peak() { # runs "$@", prints "wall_s peak_KiB"
  /usr/bin/time -f '%e %M' -o time.txt "$@" >/dev/null 2>&1 || true
  cat time.txt
}
echo "task s[i=1..1000000000]: echo {i}" > billion.slurp
read -r t kb < <(peak "$slurp" check --max-tasks 1000000000 billion.slurp)
echo "check of a 10^9-member sweep: $t s, peak $((kb / 1024)) MiB"
run_sweep() { # N: runs a sweep of N `true`, prints it, sets $kb
  local n=$1 t bytes
  echo "task s[i=1..$n]: true" > "s$n.slurp"
  read -r t kb < <(peak "$slurp" -q "s$n.slurp")
  bytes=$(stat -c %s .slurp/runs/*/events.jsonl)
  echo "run of $n members: $t s, peak $((kb / 1024)) MiB, journal $((bytes / 1024)) KiB ($((bytes / n)) B a member)"
  rm -rf .slurp
}
run_sweep "$small"; kb_small=$kb
run_sweep "$large"; kb_large=$kb
echo "peak RSS $large / $small members: $(ratio "$kb_large" "$kb_small")x"
