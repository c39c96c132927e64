#!/usr/bin/env bash
# Launch throughput and dependency latency, slurp against its peers, in one
# run on one machine (this machine is shared and noisy: compare ratios).
#
#   bench/peers.sh [N_TASKS] [CHAIN_LENGTH]     (defaults: 10000 2000)
#
# Needs GNU parallel (`apt-get install parallel`); builds slurp in release.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
n=${1:-10000}
chain=${2:-2000}
build_slurp
command -v parallel >/dev/null || { echo "GNU parallel is missing: apt-get install parallel" >&2; exit 2; }
scratch
cd "$work"


seq "$n" | sed 's/.*/true/' > tasks.slurp
cores=$(nproc)
t_xargs=$(seconds sh -c "seq $n | xargs -P$cores -n1 true")
t_parallel=$(seconds sh -c "seq $n | parallel -j$cores true")
t_slurp=$(seconds "$slurp" tasks.slurp)
echo "launch: $n tasks of true on $cores cores"
printf '  xargs -P%s     %7.2f s\n' "$cores" "$t_xargs"
printf '  parallel -j%s  %7.2f s\n' "$cores" "$t_parallel"
printf '  slurp          %7.2f s   %sx xargs, %sx parallel\n' "$t_slurp" "$(ratio "$t_slurp" "$t_xargs")" "$(ratio "$t_slurp" "$t_parallel")"

# The GNU parallel front door: the same command line for slurp and parallel
# (`true N` per value, N appended), xargs running the same commands.
seq "$n" > values
t_xargs_cl=$(seconds sh -c "xargs -P$cores -n1 true < values")
t_parallel_cl=$(seconds sh -c "parallel -j$cores true :::: values")
t_slurp_cl=$(seconds sh -c "$slurp -j$cores true :::: values")
t_slurp_args=$(seconds sh -c "$slurp -j$cores true ::: \$(cat values)")
echo "command line: -j$cores true ::: 1..$n (parallel's command line, the values appended)"
printf '  xargs -P%s -n1  %7.2f s\n' "$cores" "$t_xargs_cl"
printf '  parallel        %7.2f s\n' "$t_parallel_cl"
printf '  slurp :::: FILE %7.2f s   %sx xargs, %sx parallel\n' "$t_slurp_cl" "$(ratio "$t_slurp_cl" "$t_xargs_cl")" "$(ratio "$t_slurp_cl" "$t_parallel_cl")"
printf '  slurp ::: ARGS  %7.2f s   %sx xargs\n' "$t_slurp_args" "$(ratio "$t_slurp_args" "$t_xargs_cl")"

{
  # The same program on both sides (the shell's `true` would be a builtin).
  echo "task t1: /bin/true"
  for i in $(seq 2 "$chain"); do echo "task t$i after=t$((i - 1)): /bin/true"; done
} > chain.slurp
# The chain is short and this machine noisy: five interleaved pairs, medians.
loops=(); chains=()
for _ in 1 2 3 4 5; do
  loops+=("$(seconds sh -c "for i in \$(seq $chain); do /bin/true; done")")
  chains+=("$(seconds "$slurp" chain.slurp)")
done
t_loop_exec=$(printf '%s\n' "${loops[@]}" | median)
t_chain=$(printf '%s\n' "${chains[@]}" | median)
echo "chain: $chain tasks, each after the previous one (median of 5 interleaved runs)"
printf '  shell loop     %7.2f s\n' "$t_loop_exec"
printf '  slurp          %7.2f s   %sx the loop\n' "$t_chain" "$(ratio "$t_chain" "$t_loop_exec")"

# Nested instances: 1,000 child instances of 10 tasks each against the same
# 10,000 tasks flat, in the same run.
seq 10 | sed 's/.*/true/' > ten.slurp
echo "task n[i=1..1000]: slurp ten.slurp" > nested.slurp
seq 10000 | sed 's/.*/true/' > flat.slurp
t_flat=$(seconds "$slurp" flat.slurp)
t_nested=$(seconds "$slurp" nested.slurp)
echo "nesting: 1000 nested instances of 10 tasks against 10000 tasks flat"
printf '  flat           %7.2f s\n' "$t_flat"
printf '  nested         %7.2f s   %sx flat\n' "$t_nested" "$(ratio "$t_nested" "$t_flat")"

# The journal's cost: the launch benchmark with and without it, same run.
t_journal=$(seconds "$slurp" flat.slurp)
t_nojournal=$(seconds "$slurp" --no-journal flat.slurp)
echo "journal: 10000 tasks of true, journaled and not"
printf '  --no-journal   %7.2f s\n' "$t_nojournal"
printf '  journaled      %7.2f s   %sx\n' "$t_journal" "$(ratio "$t_journal" "$t_nojournal")"

# Start-up: a one-line file, journal off, against xargs running the same
# one command; 200 of each, interleaved in blocks of 20.
echo true > one.slurp
t_start=0; t_xstart=0
for _ in $(seq 10); do
  t_start=$(echo "$t_start + $(seconds sh -c "for i in \$(seq 20); do $slurp -q --no-journal one.slurp; done")" | bc -l)
  t_xstart=$(echo "$t_xstart + $(seconds sh -c "for i in \$(seq 20); do xargs -a one.slurp true; done")" | bc -l)
done
echo "start-up: one task, 200 runs"
printf '  xargs -a FILE  %7.2f ms a run\n' "$(echo "$t_xstart * 5" | bc -l)"
printf '  slurp          %7.2f ms a run   %sx xargs\n' "$(echo "$t_start * 5" | bc -l)" "$(ratio "$t_start" "$t_xstart")"
