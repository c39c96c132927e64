# Shared by the bench/ scripts (sourced): timing and ratios.

seconds() { # runs "$@", prints wall seconds
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null 2>&1
  end=$(date +%s.%N)
  echo "$end - $start" | bc -l
}
ratio() { echo "scale=2; $1 / $2" | bc -l; }
# The middle of N numbers on stdin (N odd).
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# Builds slurp in release: $slurp is its path.
build_slurp() {
  cargo build --release -q
  slurp=$PWD/target/release/slurp
}
# A scratch directory, $work, removed when the script exits.
scratch() {
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
}
# Timings by name, taken round by round: `add NAME SECONDS` keeps one,
# `m NAME` prints the median of a name's (0 when it has none).
declare -A t
add() { t[$1]="${t[$1]:-} $2"; }
m() { printf '%s\n' ${t[$1]:-0} | median; }
# A chain of N `/bin/true`, each `after` the one before it, in slurp's language.
chain_file() {
  echo "task t1: /bin/true"
  for i in $(seq 2 "$1"); do echo "task t$i after=t$((i - 1)): /bin/true"; done
}
