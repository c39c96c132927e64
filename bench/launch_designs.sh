#!/usr/bin/env bash
# What the shape of a launcher costs, apart from its own work: the three
# shapes of bench/launch_designs.c (floor, one event loop, runner threads
# with a coordinator), each with nothing else to do, against slurp on the
# same N x /bin/true, children bound to their CPUs and not; then a chain
# (2,000 /bin/true one after another) as the shell loop runs it, as one
# thread of the floor and one event loop with a single slot run it, and as
# slurp runs `after=` edges. Interleaved round by round; medians and ratios.
#
#   bench/launch_designs.sh [N] [ROUNDS] [SLURP]   (defaults: 5000 5, target/release/slurp)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
n=${1:-5000}
rounds=${2:-5}
if [ $# -ge 3 ]; then slurp=$(realpath "$3"); else build_slurp; fi
scratch
cc -O2 -pthread -o "$work/launch_designs" bench/launch_designs.c
cd "$work"
cores=$(nproc)
echo "task t[i=1..$n]: /bin/true" > sweep.slurp
chain_file 2000 > chain.slurp
for _ in $(seq "$rounds"); do
  for bind in 1 0; do
    for shape in floor loop handoff; do
      add "$shape-$bind" "$(BIND=$bind seconds ./launch_designs "$shape" "$n" "$cores" /bin/true)"
    done
  done
  add slurp-1 "$(seconds "$slurp" -q --no-journal sweep.slurp)"
  add slurp-0 "$(seconds "$slurp" -q --no-journal --no-bind sweep.slurp)"
  add chain-sh "$(seconds sh -c 'for i in $(seq 2000); do /bin/true; done')"
  add chain-floor "$(seconds ./launch_designs floor 2000 1 /bin/true)"
  add chain-loop "$(seconds ./launch_designs loop 2000 1 /bin/true)"
  add chain-slurp "$(seconds "$slurp" -q --no-journal chain.slurp)"
done
floor=$(m floor-1)
echo "launch shapes: $n x /bin/true on $cores cores, medians of $rounds interleaved rounds"
printf '  %-34s %8s %8s   (ratios to the bound floor, %.2f s)\n' "" bound unbound "$floor"
for row in "floor:T threads, spawn + wait each" "loop:one event loop (pidfds)" "handoff:runners + a coordinator" "slurp:slurp --no-journal"; do
  key=${row%%:*}
  printf '  %-34s %5.2f s %5.2f s   %sx %sx\n' "${row#*:}" "$(m "$key-1")" "$(m "$key-0")" \
    "$(ratio "$(m "$key-1")" "$floor")" "$(ratio "$(m "$key-0")" "$floor")"
done
loop=$(m chain-sh)
printf "chain: 2,000 x /bin/true one after another (ratios to the shell loop, %.2f s)\n" "$loop"
for row in "floor:one thread, spawn + wait" "loop:one event loop (a pidfd)" "slurp:slurp --no-journal, after= edges"; do
  key=chain-${row%%:*}
  printf '  %-38s %5.2f s   %sx\n' "${row#*:}" "$(m "$key")" "$(ratio "$(m "$key")" "$loop")"
done
