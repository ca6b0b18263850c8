#!/usr/bin/env bash
# Mutant check: is every built-in mutant caught in every run, on a busy
# machine?
#
# For each mutant of the reference (certify --bug NAME), certify runs RUNS
# times on the embedded default in process mode while BURNERS CPU-bound
# processes run, and each run must end NOT CERTIFIED (exit 1) with a broken
# invariant (certify --fail-fast: it stops starting cases at the first
# failure). Runs go round-robin over the mutants. A run that certifies, or ends undecided, is a miss: a mutant
# whose catch rests on chance. Prints each mutant's catches (k/RUNS) and the
# invariants it broke, then a summary. Target: every mutant RUNS/RUNS.
#
# Exit status: 0 when every mutant was caught in every run, 1 otherwise.
#
# BACKEND_MUTANTS are store mutants (certify --mutant NAME) run the same
# way beside them (by default renew-ignores-holder, which only a case class
# of the matrix catches); a name in MUTANTS that BACKEND_MUTANTS lists is
# switched on with --mutant.
#
#   ci/bench-mutants.sh                        # every mutant, 20 runs each
#   MUTANTS="cas-on-fresh-revision renew-ignores-holder" RUNS=5 ci/bench-mutants.sh
set -euo pipefail

cd "$(dirname "$0")/.."
BIN=${BIN:-bin/crashmatrix}
RUNS=${RUNS:-20}
BURNERS=${BURNERS:-2}
ARGS=${ARGS:-}
# The case data on tmpfs where there is one: the bench is about CPU load,
# and on a busy disk a worker can wait longer than its deadline in one
# SQLite fsync (the case then ends undecided, "stuck in an fsync").
base=${TMPDIR:-/tmp}
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then base=/dev/shm; fi
OUT=${OUT:-$(mktemp -d "$base/crashmatrix-mutants-XXXXXX")}

[ -x "$BIN" ] || { echo "bench-mutants: $BIN missing (make build)" >&2; exit 2; }
mkdir -p "$OUT"
BACKEND_MUTANTS=${BACKEND_MUTANTS-renew-ignores-holder}
if [ -z "${MUTANTS:-}" ]; then
	# The --bug flag's help lists them: "... mutant: a, b, c".
	MUTANTS=$("$BIN" certify --help | sed -nE 's/.*--bug strings.*mutant\(s\): (.*)$/\1/p' | tr -d ',')
	[ -z "$MUTANTS" ] || MUTANTS="$MUTANTS $BACKEND_MUTANTS"
fi
[ -n "$MUTANTS" ] || { echo "bench-mutants: no mutants found in certify --help" >&2; exit 2; }
# flag_of NAME: the certify flag that switches the mutant on.
flag_of() {
	case " $BACKEND_MUTANTS " in
	*" $1 "*) echo --mutant ;;
	*) echo --bug ;;
	esac
}

burners=()
stop_burners() {
	for pid in "${burners[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${burners[@]}"; do wait "$pid" 2>/dev/null || true; done
	burners=()
}
trap stop_burners EXIT
# An interrupted run stops: a trap that only returned would go on to the
# next certify, without its burners.
trap 'exit 130' INT TERM
for _ in $(seq "$BURNERS"); do
	bash -c 'while :; do :; done' &
	burners+=("$!")
done

echo "bench-mutants: $RUNS runs of each mutant with $BURNERS CPU-bound processes running; logs in $OUT"
all=0
missed=0
declare -A caught broke
for m in $MUTANTS; do caught[$m]=0; broke[$m]=""; done
# Round-robin: run i of every mutant, then run i+1, so that an interrupted
# measurement still has the same number of runs of each.
for i in $(seq "$RUNS"); do
	for m in $MUTANTS; do
		log="$OUT/$m-$i.log"
		set +e
		# --fail-fast: a run asks only whether the mutant breaks anything,
		# so it stops starting cases at the first failure.
		# shellcheck disable=SC2086
		"$BIN" certify "$(flag_of "$m")" "$m" --quiet --fail-fast --workdir "$OUT/work-$m-$i" $ARGS >"$log" 2>&1
		code=$?
		set -e
		rm -rf "$OUT/work-$m-$i"
		# Caught: NOT CERTIFIED for a broken invariant, not for a case
		# left not exercised (that exits 1 too).
		if [ "$code" = 1 ] && grep -qE '^NOT CERTIFIED: broken I[0-9]' "$log"; then
			caught[$m]=$((caught[$m] + 1))
			broke[$m]=$(sed -nE 's/^NOT CERTIFIED: broken (I[0-9].*)$/\1/p' "$log" | sed -E 's/ in [0-9]+ cases?//g' | tail -n 1)
		fi
	done
	echo "  run $i of $RUNS done ($(date -u +%H:%M:%S))"
done
for m in $MUTANTS; do
	all=$((all + 1))
	[ "${caught[$m]}" = "$RUNS" ] || missed=$((missed + 1))
	printf '  %-34s caught %2d/%d  %s\n' "$m" "${caught[$m]}" "$RUNS" "${broke[$m]}"
done
if [ "$missed" = 0 ]; then
	rm -rf "$OUT"
	echo "mutants: all $all caught in $RUNS/$RUNS loaded runs (target: every mutant in every run: met)"
else
	echo "mutants: $missed of $all missed at least once in $RUNS loaded runs (target: every mutant in every run: not met); logs in $OUT"
	exit 1
fi
