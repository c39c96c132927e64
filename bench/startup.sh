#!/usr/bin/env bash
# Start-up: `slurp -q --no-journal` on a one-line file (one `/bin/true`)
# against `xargs` running the same command and against the floor (the C
# program of bench/spawn_floor.c starting one `/bin/true`: exec, one
# posix_spawn, one waitpid), and `slurp --version` (start
# and exit alone), interleaved round by round; medians of the rounds'
# means (`perf stat -r RUNS`), with page faults (most of what a start costs
# on this machine).
#
#   bench/startup.sh [ROUNDS] [RUNS] [SLURP...]   (defaults: 5 200, target/release/slurp)
#
# Give two or more binaries (before and after a change) to compare them
# side by side; this machine is shared and noisy, so only figures from the
# same run compare.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
rounds=${1:-5}
runs=${2:-200}
shift $(($# < 2 ? $# : 2))
if [ $# -eq 0 ]; then
  build_slurp
  set -- "$slurp"
fi
command -v perf >/dev/null || { echo "bench/startup.sh needs perf (Debian: linux-perf)" >&2; exit 2; }
bins=()
for b in "$@"; do bins+=("$(realpath "$b")"); done
scratch
cc -O2 -pthread -o "$work/spawn_floor" bench/spawn_floor.c
cd "$work"
echo true > one.slurp
# "faults seconds" of `perf stat -r $runs` over "$@".
measure() {
  perf stat -r "$runs" -x, -e page-faults "$@" 2>&1 >/dev/null |
    awk -F, '/page-faults/ { f = $1 } END { print f }' | tr -d '\n'
  echo -n " "
  perf stat -r "$runs" "$@" 2>&1 >/dev/null | awk '/elapsed/ { print $1 }'
}
# `addf NAME FAULTS SECS`: the time into lib.sh's table, the faults beside.
declare -A f
addf() { f[$1]=$2; add "$1" "$3"; }
for _ in $(seq "$rounds"); do
  addf xargs $(measure xargs -a one.slurp /bin/true)
  addf floor $(measure ./spawn_floor 1 1 /bin/true)
  for i in "${!bins[@]}"; do
    addf "run$i" $(measure "${bins[$i]}" -q --no-journal one.slurp)
    addf "version$i" $(measure "${bins[$i]}" --version)
  done
done
ms() { echo "scale=2; $(m "$1") * 1000 / 1" | bc -l; }
x=$(m xargs)
fl=$(m floor)
echo "start-up: medians of $rounds interleaved rounds of $runs runs each"
printf '  %-40s %6s ms  %4s faults\n' "floor: spawn_floor 1 1 /bin/true" "$(ms floor)" "${f[floor]}"
printf '  %-40s %6s ms  %4s faults  %sx the floor\n' "xargs -a one.slurp /bin/true" "$(ms xargs)" "${f[xargs]}" "$(ratio "$x" "$fl")"
for i in "${!bins[@]}"; do
  echo "  ${bins[$i]}"
  printf '    %-38s %6s ms  %4s faults  %sx xargs, %sx the floor\n' "-q --no-journal one.slurp" "$(ms "run$i")" "${f[run$i]}" "$(ratio "$(m "run$i")" "$x")" "$(ratio "$(m "run$i")" "$fl")"
  printf '    %-38s %6s ms  %4s faults\n' "--version" "$(ms "version$i")" "${f[version$i]}"
done
