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
small=${1:-100000}
large=${2:-1000000}
cargo build --release -q
slurp=$PWD/target/release/slurp
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
peak() { # runs "$@", prints "wall_s peak_KiB"
  /usr/bin/time -f '%e %M' -o time.txt "$@" >/dev/null 2>&1 || true
  cat time.txt
}
echo "task s[i=1..1000000000]: echo {i}" > billion.slurp
read -r t kb < <(peak "$slurp" check --max-tasks 1000000000 billion.slurp)
echo "check of a 10^9-member sweep: $t s, peak $((kb / 1024)) MiB"
for n in "$small" "$large"; do
  echo "task s[i=1..$n]: true" > s$n.slurp
  read -r t kb < <(peak "$slurp" -q s$n.slurp)
  bytes=$(stat -c %s .slurp/runs/*/events.jsonl)
  echo "run of $n members: $t s, peak $((kb / 1024)) MiB, journal $((bytes / 1024)) KiB ($((bytes / n)) B a member)"
  eval "kb_$n=$kb"
  rm -rf .slurp
done
eval "a=\$kb_$small b=\$kb_$large"
echo "peak RSS $large / $small members: $(echo "scale=2; $b / $a" | bc -l)x"
