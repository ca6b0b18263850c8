package main

import "testing"

// A conformance failure's replay line names go test, which a store run by
// --store-cmd has none of: certify rewrites it as the crashmatrix command
// that runs the same subtest, with the same seed, on the same store.
func TestConformanceReplayLineNamesCrashmatrix(t *testing.T) {
	s := storeCmdFlags{command: "python3 my store.py", planSave: "python3 plans.py"}
	msg := "model-based property \"x\" failed with gopter seed 7 (status FAILED):\nops\nreplay: CRASHMATRIX_CONFORMANCE_SEED=7 go test -run '^$/^Stores$/^OperationStore$/^ModelBasedCommands$'"
	want := "model-based property \"x\" failed with gopter seed 7 (status FAILED):\nops\nreplay: CRASHMATRIX_CONFORMANCE_SEED=7 crashmatrix certify --store-cmd 'python3 my store.py' --plansave-cmd 'python3 plans.py' --conformance-run '^Stores$/^OperationStore$/^ModelBasedCommands$'"
	if got := s.replayLine(msg); got != want {
		t.Errorf("replay line:\n got %s\nwant %s", got, want)
	}
	if got := anchored("PlanSave/PlanStore/Save.Of(x)"); got != `^PlanSave$/^PlanStore$/^Save\.Of\(x\)$` {
		t.Errorf("anchored = %s", got)
	}
}
