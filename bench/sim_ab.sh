#!/usr/bin/env bash
# Two slurp binaries, before and after a change to the simulator, replaying
# a whole trace in the reference model policy by policy, interleaved round
# by round (this machine is shared and noisy: only figures taken side by
# side compare). Prints each policy's median wall seconds for both and
# their ratio, and whether the two `--json` outputs are byte-identical (a
# speed-up of the reference model must not move one start).
#
#   bench/sim_ab.sh BEFORE AFTER [TRACE] [ROUNDS] [POLICIES]
#
# BEFORE and AFTER are slurp binaries (a file, or a command on PATH) and
# TRACE a file, each relative to where the script is called from.
# TRACE defaults to ../shared/traces/RICC-2010-2.swf.xz (447,794 jobs; read
# once into a scratch .swf so decompression is not timed); ROUNDS to 3;
# POLICIES (space-separated, each as `--policy` takes it) to
# "easy sjf+easy f1+easy fairshare+easy".
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
# Each resolved from where the script was called, before it moves to the
# repository.
binary() {
  local path=$1
  [ -f "$path" ] || path=$(command -v -- "$1") || { echo "sim_ab.sh: no slurp binary '$1'" >&2; exit 2; }
  realpath -- "$path"
}
before=$(binary "$1")
after=$(binary "$2")
if [ $# -ge 3 ]; then
  [ -f "$3" ] || { echo "sim_ab.sh: no trace '$3'" >&2; exit 2; }
  trace=$(realpath -- "$3")
fi
cd "$(dirname "$0")/.."
. bench/lib.sh
trace=${trace:-../shared/traces/RICC-2010-2.swf.xz}
rounds=${4:-3}
policies=${5:-easy sjf+easy f1+easy fairshare+easy}
scratch
case "$trace" in
  *.xz) xz -dc "$trace" > "$work/trace.swf"; trace=$work/trace.swf ;;
  *.gz) gzip -dc "$trace" > "$work/trace.swf"; trace=$work/trace.swf ;;
esac
for _ in $(seq "$rounds"); do
  for p in $policies; do
    for side in before after; do
      add "$side $p" "$(seconds "${!side}" sim "$trace" --model reference --policy "$p")"
    done
  done
done
printf '%-16s %10s %10s %7s  %s\n' policy "before s" "after s" ratio output
for p in $policies; do
  "$before" sim "$trace" --model reference --policy "$p" --json > "$work/before.json"
  "$after" sim "$trace" --model reference --policy "$p" --json > "$work/after.json"
  same=$(cmp -s "$work/before.json" "$work/after.json" && echo byte-identical || echo DIFFERENT)
  b=$(m "before $p")
  a=$(m "after $p")
  printf '%-16s %10.2f %10.2f %6.1fx  %s\n' "$p" "$b" "$a" "$(ratio "$b" "$a")" "$same"
done
