#!/usr/bin/env bash
# Launching inside a Flux instance: 200 tasks of `true` started by slurp
# (one `flux run` per rank) against `flux submit --cc=1-200 --wait true`
# in the same one-broker instance, interleaved, medians of 3.
#
#   bench/flux.sh [N]      (needs a Flux: scripts/local-flux.sh builds one)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
n=${1:-200}
build_slurp
prefix=$(scripts/local-flux.sh prefix)
export PATH="$prefix/bin:$PATH"
command -v flux >/dev/null || { echo "no Flux: scripts/local-flux.sh build" >&2; exit 2; }
scratch
cd "$work"
seq "$n" | sed 's/.*/true/' > tasks.slurp
flux start -s1 sh -c "
  t() { s=\$(date +%s.%N); \"\$@\" >/dev/null 2>&1; e=\$(date +%s.%N); echo \"\$e - \$s\" | bc -l; }
  for i in 1 2 3; do
    echo flux \$(t flux submit --cc=1-$n --wait true)
    echo slurp \$(t $slurp -q --no-journal tasks.slurp)
  done
" > times
t_flux=$(grep '^flux' times | cut -d' ' -f2 | median)
t_slurp=$(grep '^slurp' times | cut -d' ' -f2 | median)
echo "inside a Flux instance: $n tasks of true (median of 3 interleaved)"
printf '  flux submit --cc   %6.2f s\n' "$t_flux"
printf '  slurp              %6.2f s   %sx\n' "$t_slurp" "$(ratio "$t_slurp" "$t_flux")"
