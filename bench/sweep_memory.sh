#!/usr/bin/env bash
# What a huge sweep costs: `slurp check` of a 10^9-member sweep (time, peak
# RSS), real runs of sweeps of `true` at two sizes (peak RSS, journal size,
# then `status`, `report` and `resume` of each): memory and journal should not grow
# with the sweep; the journal's rewrites on and off on the small run, same
# session; and a 10^8-member run killed after a few seconds: `status`,
# `report`, `log` of it and how soon its `resume` starts a member.
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
run_sweep() { # N: runs a sweep of N `true`, prints it, sets $kb and $t
  local n=$1 bytes st skb rt rkb ut ukb
  echo "task s[i=1..$n]: true" > "s$n.slurp"
  read -r t kb < <(peak "$slurp" -q "s$n.slurp")
  bytes=$(stat -c %s .slurp/runs/*/events.jsonl)
  read -r st skb < <(peak "$slurp" status)
  read -r rt rkb < <(peak "$slurp" report -o r.html)
  # Resuming the finished run takes every member over and runs none.
  read -r ut ukb < <(peak "$slurp" resume)
  echo "run of $n members: $t s, peak $((kb / 1024)) MiB, journal $bytes B; status $st s $((skb / 1024)) MiB, report $rt s $((rkb / 1024)) MiB, resume $ut s $((ukb / 1024)) MiB"
  rm -rf .slurp
}
run_sweep "$small"; kb_small=$kb
run_sweep "$large"; kb_large=$kb
echo "peak RSS $large / $small members: $(ratio "$kb_large" "$kb_small")x"
# Rewrites on (the default) and off, interleaved.
for k in 1 2 3; do
  run_sweep "$small"; echo "$t" >> on.txt
  SLURP_JOURNAL_COMPACT=1000000000000 run_sweep "$small"; echo "$t" >> off.txt
done
on=$(median < on.txt); off=$(median < off.txt)
echo "run of $small members, median of 3: rewrites on $on s, off $off s: $(ratio "$on" "$off")x"
# A 10^8-member sweep, killed after 8 s.
echo "task s[i=1..100000000]: true" > huge.slurp
"$slurp" -q --max-tasks 100000000 huge.slurp >/dev/null 2>&1 & pid=$!
sleep 8; kill -9 $pid; wait $pid 2>/dev/null || true
for cmd in status runs "log s[77]"; do
  read -r t kb < <(peak "$slurp" $cmd)
  echo "10^8 run killed: slurp $cmd $t s, $((kb / 1024)) MiB"
done
read -r t kb < <(peak "$slurp" report -o r.html)
echo "10^8 run killed: slurp report $t s, $((kb / 1024)) MiB"
before=$(ls .slurp/runs | wc -l)
start=$(date +%s.%N)
"$slurp" resume >/dev/null 2>&1 & pid=$!
until [ "$(ls .slurp/runs | wc -l)" -gt "$before" ] &&
  grep -q '"ev":"start"' "$(ls -d .slurp/runs/* | tail -1)/events.jsonl" 2>/dev/null; do
  sleep 0.05
done
echo "10^8 run killed: its resume started a member after $(echo "$(date +%s.%N) - $start" | bc -l | cut -c1-5) s, $(($(ps -o rss= $pid) / 1024)) MiB"
kill -9 $pid; wait $pid 2>/dev/null || true
