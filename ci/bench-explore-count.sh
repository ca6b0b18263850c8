#!/usr/bin/env bash
# The default exploration count of certify (internal/explorerun.DefaultCount),
# measured again: for each mutant that only exploration found when the count
# was chosen, on each seed of a sample, the index of the first schedule that
# breaks an invariant (crashmatrix explore --seed S, in-process on the
# embedded default, as certify explores); the smallest count that finds
# every one on every seed is the largest index + 1. Then one certify of
# the unmodified reference with that count: the matrix's time and the
# exploration's, from the same run (the target is at most 1.5x).
#
# Exit status: 0 when the default count finds every mutant on every seed
# of the sample, 1 otherwise (or when a mutant is not built in).
#
#   ci/bench-explore-count.sh
#   SEEDS="1 2 3" MUTANTS="--bug=scan-skips-pending-dead-letter" ci/bench-explore-count.sh
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${BIN:-bin/crashmatrix}
SEEDS=${SEEDS:-$(seq 1 20)}
LIMIT=${LIMIT:-20000}
# One word per mutant: the flag that switches it on.
MUTANTS=${MUTANTS:---mutant=renew-ignores-holder --bug=scan-skips-pending-dead-letter --bug=support-ignores-pending-plans}
base=${TMPDIR:-/tmp}
OUT=${OUT:-$(mktemp -d "$base/crashmatrix-explore-count-XXXXXX")}

[ -x "$BIN" ] || { echo "bench-explore-count: $BIN missing (make build)" >&2; exit 2; }
mkdir -p "$OUT"
default=$(sed -nE 's/^const DefaultCount = ([0-9]+)$/\1/p' internal/explorerun/explorerun.go)
echo "bench-explore-count: seeds $(echo $SEEDS), up to $LIMIT schedules each; default count $default; logs in $OUT"
need=0
status=0
for m in $MUTANTS; do
	idx=()
	for s in $SEEDS; do
		log="$OUT/${m//[^a-z0-9-]/_}-$s.log"
		set +e
		"$BIN" explore --seed "$s" --max "$LIMIT" --budget 1h "$m" --out "$OUT/findings" >"$log" 2>&1
		code=$?
		set -e
		i=$(sed -nE 's/^VIOLATION .* in schedule ([0-9]+) of seed .*/\1/p' "$log" | head -n 1)
		if [ "$code" != 1 ] || [ -z "$i" ]; then
			echo "  $m seed $s: not found in $LIMIT schedules (exit $code; $log)"
			status=1
			continue
		fi
		idx+=("$s:$i")
		[ "$i" -lt "$need" ] || need=$((i + 1))
	done
	echo "  $m: first breaking schedule per seed: ${idx[*]}"
done
echo "smallest count that finds every mutant on every seed: $need (default $default)"
[ "$need" -le "$default" ] || status=1
set +e
"$BIN" certify --quiet --explore "$need" --workdir "$OUT/certify" --json "$OUT/certify.json" >"$OUT/certify.log" 2>&1
code=$?
set -e
matrix=$(sed -nE 's/^[0-9]+ cases in ([^:]+): .*/\1/p' "$OUT/certify.log" | head -n 1)
explored=$(sed -nE 's/.*exploration: .* no invariant broken in ([^ ;]+).*/\1/p' "$OUT/certify.log" | head -n 1)
echo "certify of the unmodified reference (exit $code): matrix $matrix, exploration of $need schedules $explored (target: at most 1.5x the matrix)"
rm -rf "$OUT/certify"
exit "$status"
