#!/usr/bin/env bash
# Launching at the floor: N short tasks (`/bin/true`) on every core, slurp
# against a bare C loop of posix_spawn + waitpid on as many threads (the
# physical floor, bench/spawn_floor.c) and against `xargs -P`, interleaved
# runs in one session, medians and ratios. Then the same sweep with a memory
# limit on every member (`mem=1G`: a cgroup to join, or a watch), and tagged
# output: N `/bin/echo` (one line each) with `--output tag`, against the
# floor running the same.
#
#   bench/launch.sh [N_TASKS] [ROUNDS]     (defaults: 10000 5)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
n=${1:-10000}
rounds=${2:-5}
build_slurp
scratch
cc -O2 -pthread -o "$work/spawn_floor" bench/spawn_floor.c
cd "$work"
cores=$(nproc)
seq "$n" | sed 's|.*|/bin/true|' > tasks.slurp
echo "task t[i=1..$n]: /bin/true" > sweep.slurp
echo "task t[i=1..$n]: /bin/echo" > echo.slurp
echo "task t[i=1..$n] mem=1G: /bin/true" > mem.slurp
floor=(); xargs_=(); lines=(); sweep=(); nojournal=(); mem=(); floor_echo=(); tag=()
for _ in $(seq "$rounds"); do
  floor+=("$(seconds ./spawn_floor "$n" "$cores" /bin/true)")
  xargs_+=("$(seconds sh -c "seq $n | xargs -P$cores -n1 /bin/true")")
  lines+=("$(seconds "$slurp" -q tasks.slurp)")
  sweep+=("$(seconds "$slurp" -q sweep.slurp)")
  nojournal+=("$(seconds "$slurp" -q --no-journal sweep.slurp)")
  mem+=("$(seconds "$slurp" -q mem.slurp)")
  floor_echo+=("$(seconds ./spawn_floor "$n" "$cores" /bin/echo)")
  tag+=("$(seconds "$slurp" -q --output tag echo.slurp)")
  rm -rf .slurp
done
m() { printf '%s\n' "$@" | median; }
t_floor=$(m "${floor[@]}"); t_xargs=$(m "${xargs_[@]}")
t_lines=$(m "${lines[@]}"); t_sweep=$(m "${sweep[@]}"); t_nojournal=$(m "${nojournal[@]}")
t_mem=$(m "${mem[@]}"); t_floor_echo=$(m "${floor_echo[@]}"); t_tag=$(m "${tag[@]}")
echo "launch: $n x /bin/true on $cores cores, medians of $rounds interleaved rounds"
printf '  posix_spawn floor    %7.2f s\n' "$t_floor"
printf '  xargs -P%s            %7.2f s   %sx the floor\n' "$cores" "$t_xargs" "$(ratio "$t_xargs" "$t_floor")"
printf '  slurp (lines)        %7.2f s   %sx the floor, %sx xargs\n' "$t_lines" "$(ratio "$t_lines" "$t_floor")" "$(ratio "$t_lines" "$t_xargs")"
printf '  slurp (one sweep)    %7.2f s   %sx the floor, %sx xargs\n' "$t_sweep" "$(ratio "$t_sweep" "$t_floor")" "$(ratio "$t_sweep" "$t_xargs")"
printf '  slurp --no-journal   %7.2f s   %sx the floor\n' "$t_nojournal" "$(ratio "$t_nojournal" "$t_floor")"
printf '  slurp mem=1G (%s) %7.2f s   %sx the floor\n' "$("$slurp" resources | awk '/^limits/ { print ($7 == "cgroup" ? "cgroup" : "watch ") }')" "$t_mem" "$(ratio "$t_mem" "$t_floor")"
printf '  floor, /bin/echo     %7.2f s\n' "$t_floor_echo"
printf '  slurp --output tag   %7.2f s   %sx the floor (/bin/echo, a line each)\n' "$t_tag" "$(ratio "$t_tag" "$t_floor_echo")"
