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
