#!/usr/bin/env bash
# Two slurp binaries, before and after a change, on the launch and the
# chain, interleaved round by round with their floors (this machine is
# shared and noisy: only figures taken side by side compare). Medians, and
# the CPU each takes with its tasks, beside the floor's and the loop's.
#
#   bench/ab.sh BEFORE AFTER [ROUNDS]     (default 7)
#
# Launch: 10,000 x /bin/true as one sweep (with its journal, as users run
# it) against bench/spawn_floor.c on every core. Chain: 2,000 /bin/true, each
# after the previous, with and without the journal, against the shell loop.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
[ $# -ge 2 ] || { sed -n '2,11p' "$0" >&2; exit 2; }
before=$(realpath "$1")
after=$(realpath "$2")
rounds=${3:-7}
scratch
cc -O2 -pthread -o "$work/spawn_floor" bench/spawn_floor.c
cd "$work"
cores=$(nproc)
echo "task t[i=1..10000]: /bin/true" > sweep.slurp
chain_file 2000 > chain.slurp
# CPU in seconds, user + system, of the command and everything it starts: slurp's
# own is what it takes over the floor's (or the loop's), which start the same
# children. (Not `perf stat --no-inherit`: that counts the first thread only,
# and slurp's reaper threads do most of its work.)
cpu() {
  perf stat -x, -e task-clock "$@" 2>&1 >/dev/null | awk -F, '/task-clock/ { print $1 / 1000 }'
}
for _ in $(seq "$rounds"); do
  add floor "$(seconds ./spawn_floor 10000 "$cores" /bin/true)"
  add loop "$(seconds sh -c 'for i in $(seq 2000); do /bin/true; done')"
  if command -v perf >/dev/null; then
    add cpu-floor "$(cpu ./spawn_floor 10000 "$cores" /bin/true)"
    add cpu-loop "$(cpu sh -c 'for i in $(seq 2000); do /bin/true; done')"
  fi
  for side in before after; do
    bin=${!side}
    add "launch-$side" "$(seconds "$bin" -q sweep.slurp)"; rm -rf .slurp
    add "chain-$side" "$(seconds "$bin" -q chain.slurp)"; rm -rf .slurp
    add "chainnj-$side" "$(seconds "$bin" -q --no-journal chain.slurp)"
    if command -v perf >/dev/null; then
      add "cpu-launch-$side" "$(cpu "$bin" -q --no-journal sweep.slurp)"
      add "cpu-chain-$side" "$(cpu "$bin" -q --no-journal chain.slurp)"
    fi
  done
done
echo "A/B: $rounds interleaved rounds, medians (before: $1, after: $2)"
printf '  posix_spawn floor, 10,000 x true   %6.2f s\n' "$(m floor)"
printf '  shell loop, 2,000 x true           %6.2f s\n' "$(m loop)"
if command -v perf >/dev/null; then
  printf '  CPU, tasks included: floor %6.3f s, loop %6.3f s\n' "$(m cpu-floor)" "$(m cpu-loop)"
fi
for side in before after; do
  printf '  %-6s launch %6.2f s (%sx the floor)  chain %6.2f s (%sx the loop)  --no-journal %6.2f s (%sx)\n' \
    "$side" "$(m "launch-$side")" "$(ratio "$(m "launch-$side")" "$(m floor)")" \
    "$(m "chain-$side")" "$(ratio "$(m "chain-$side")" "$(m loop)")" \
    "$(m "chainnj-$side")" "$(ratio "$(m "chainnj-$side")" "$(m loop)")"
  if command -v perf >/dev/null; then
    printf '         CPU, tasks included (--no-journal): launch %6.3f s, chain %6.3f s\n' "$(m "cpu-launch-$side")" "$(m "cpu-chain-$side")"
  fi
done
