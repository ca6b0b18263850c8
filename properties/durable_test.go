package properties_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/crashrun"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// A Go store on the embedded SQLite that writes an operation and its plan
// in two commits, with no window declared, is caught by the matrix's
// durable-step sweep (the lazy mount sees the two WAL syncs of
// CreateIfAbsent, and the worker is killed right after the first).
func TestDurableStepSweepCatchesAnUndeclaredTwoStepGoStore(t *testing.T) {
	rep := crashrun.Run(t, twoStepCreateBackend(false), crashrun.Options{Classes: []string{catalogue.DurableStepClass}}).Report
	if len(rep.StoreWindows) != 0 {
		t.Fatalf("the undeclared store reports store windows %+v", rep.StoreWindows)
	}
	var failed []string
	for _, r := range rep.Results {
		if r.Verdict == verdict.Fail && slices.Contains(r.Broken(), "I5") && strings.HasPrefix(r.Case.Description, "ops.create after ") {
			failed = append(failed, r.Case.ID)
		}
	}
	t.Logf("sweep cases failing I5 in ops.create: %v", failed)
	// A kill right after the first commit's sync, and a power cut there.
	if rep.ExitCode != 1 || len(failed) != 2 {
		var got []string
		for _, r := range rep.Results {
			got = append(got, r.Case.ID+" "+string(r.Verdict)+" "+strings.Join(r.Broken(), ","))
		}
		t.Fatalf("the undeclared two-step create: exit %d, ops.create sweep cases failing I5: %v; results %q", rep.ExitCode, failed, got)
	}
}
