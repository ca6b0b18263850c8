package certifyrun

import (
	"fmt"
	"strings"
	"testing"
)

// A conformance failure's replay line names go test, which a store run by
// --store-cmd has none of: certify rewrites it as the crashmatrix command
// that runs the same subtest, with the same seed, on the same store.
func TestConformanceReplayLineNamesCrashmatrix(t *testing.T) {
	s := Conformance{Store: "python3 my store.py", PlanSave: "python3 plans.py", ReplayArgs: []string{"--store-cmd", "'python3 my store.py'", "--plansave-cmd", "'python3 plans.py'"}}
	msg := "model-based property \"x\" failed with gopter seed 7 (status FAILED):\nops\nreplay: CRASHMATRIX_CONFORMANCE_SEED=7 go test -run '^$/^Stores$/^OperationStore$/^ModelBasedCommands$'"
	want := "model-based property \"x\" failed with gopter seed 7 (status FAILED):\nops\nreplay: CRASHMATRIX_CONFORMANCE_SEED=7 crashmatrix certify --store-cmd 'python3 my store.py' --plansave-cmd 'python3 plans.py' --conformance-run '^Stores$/^OperationStore$/^ModelBasedCommands$'"
	if got := s.replayLine(msg); got != want {
		t.Errorf("replay line:\n got %s\nwant %s", got, want)
	}
	if got := anchored("PlanSave/PlanStore/Save.Of(x)"); got != `^PlanSave$/^PlanStore$/^Save\.Of\(x\)$` {
		t.Errorf("anchored = %s", got)
	}
}

// A conformance failure that quotes a long history prints its head, how
// much it left out, and its last line (the rerun command) without -v.
func TestLongConformanceFailureIsClipped(t *testing.T) {
	var long []string
	for i := 0; i < 200; i++ {
		long = append(long, fmt.Sprintf("history line %d", i))
	}
	long = append(long, "rerun alone: crashmatrix certify --conformance-run x")
	got := strings.Split(clip(strings.Join(long, "\n")), "\n")
	if len(got) != maxFailureLines || got[0] != "history line 0" || got[len(got)-1] != long[len(long)-1] || got[len(got)-2] != "… 178 more lines (-v prints them)" {
		t.Errorf("clipped to %d lines: first %q, last two %q", len(got), got[0], got[len(got)-2:])
	}
	if short := "one\ntwo"; clip(short) != short {
		t.Errorf("a short failure was changed: %q", clip(short))
	}
}
