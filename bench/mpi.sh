#!/usr/bin/env bash
# MPI wire-up: an MPICH hello + allreduce on 2, 4 and 8 ranks, started by
# slurp (its own PMI-1, `ntasks=N`) and by MPICH's `mpirun` (Hydra), in
# one run, interleaved, medians of 7; and the cost of memory limits on the
# 10,000-task launch benchmark (mem=64M on every task, by this machine's
# mechanism and by the watch, against no limit).
#
#   bench/mpi.sh          (needs mpich and libmpich-dev; builds slurp in release)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
build_slurp
command -v mpicc >/dev/null || { echo "MPICH is missing: apt-get install mpich libmpich-dev" >&2; exit 2; }
scratch
mpicc -O2 -o "$work/hello" tests/mpi/hello.c
cd "$work"


echo "MPI hello + allreduce, wall time of the whole start (median of 7 interleaved)"
for n in 2 4 8; do
  echo "task hello ntasks=$n: ./hello" > pmi.slurp
  ours=(); theirs=()
  for _ in 1 2 3 4 5 6 7; do
    ours+=("$(seconds "$slurp" -q --no-journal --cores "$n" pmi.slurp)")
    theirs+=("$(seconds mpirun -np "$n" ./hello)")
  done
  t_ours=$(printf '%s\n' "${ours[@]}" | median)
  t_theirs=$(printf '%s\n' "${theirs[@]}" | median)
  printf '  %d ranks  mpirun %6.3f s   slurp %6.3f s   %sx mpirun\n' "$n" "$t_theirs" "$t_ours" "$(ratio "$t_ours" "$t_theirs")"
done

seq 10000 | sed 's/.*/true/' > plain.slurp
{ echo "defaults mem=64M"; cat plain.slurp; } > limited.slurp
# Three interleaved triples, medians (this machine is noisy).
plain=(); limit=(); watch=()
for _ in 1 2 3; do
  plain+=("$(seconds "$slurp" plain.slurp)")
  limit+=("$(seconds "$slurp" limited.slurp)")
  watch+=("$(SLURP_MEMORY=watch seconds "$slurp" limited.slurp)")
done
t_plain=$(printf '%s\n' "${plain[@]}" | median)
t_limit=$(printf '%s\n' "${limit[@]}" | median)
t_watch=$(printf '%s\n' "${watch[@]}" | median)
mechanism=$("$slurp" resources | sed -n 's/^limits  a task.s mem= held by \(cgroup v[12]\|resident memory\).*/\1/p')
echo "memory limits: 10000 tasks of true, mem=64M each against none (medians of 3 interleaved)"
printf '  no limit              %6.2f s\n' "$t_plain"
printf '  %-21s %6.2f s   %sx\n' "$mechanism" "$t_limit" "$(ratio "$t_limit" "$t_plain")"
printf '  watch                 %6.2f s   %sx\n' "$t_watch" "$(ratio "$t_watch" "$t_plain")"
