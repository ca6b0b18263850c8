package storecmd_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/faults/lazyfs"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/storecmd"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// A store that commits an operation and its plan in two transactions,
// and declares no window between them, was certified by the whole matrix
// and by hundreds of random kills: nothing crashed it between its two
// fsyncs. The durable-step sweep finds the gap from the store's own file
// operations on the lazy mount: the probe counts two durable steps in
// ops.create, and the case killed right after the first is caught (I5).
// The correct store takes one durable step per call, so the sweep has
// nothing to add and nothing fails; a case whose step is never reached
// is not exercised, never a pass.
func TestDurableStepSweepCatchesAnUndeclaredTwoTransactionCreate(t *testing.T) {
	if err := lazyfs.Available(); err != nil {
		t.Fatal(sim.PowerLossNotTested(err.Error()))
	}
	runner := func(command string) *sim.Runner {
		t.Helper()
		r, err := sim.NewRunner(sim.Config{Backend: storecmd.Spec(command, "", "", 0), WorkDir: t.TempDir(), Seed: 1,
			Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.CloseShared)
		return r
	}
	sweep := func(r *sim.Runner) ([]catalogue.Case, verdict.Probe) {
		t.Helper()
		pr, err := r.Probe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		sel := catalogue.Selection{Classes: []string{catalogue.DurableStepClass}}
		if _, err := r.PowerLossSelection(&sel); err != nil {
			t.Fatal(err)
		}
		return sel.Cases(pr.Probe, catalogue.Lease(600*time.Millisecond), 1), pr
	}

	t.Run("undeclared two transactions", func(t *testing.T) {
		r := runner(pythonStore(t, "../../examples/python/sqlite_store.py", "--two-transactions", "--undeclared"))
		cases, pr := sweep(r)
		var names []string
		for _, c := range cases {
			names = append(names, c.Description)
		}
		// One gap in ops.create: a kill, a power cut and a torn power cut
		// (512-byte sectors) there.
		var creates []catalogue.Case
		for _, c := range cases {
			if c.Steps[0].Durable.Method == "ops.create" {
				creates = append(creates, c)
			}
		}
		if len(creates) != 3 || creates[0].Kind != faults.Crash || creates[1].Kind != faults.PowerLoss || creates[2].Kind != faults.TornWrite {
			t.Fatalf("durable-step cases in ops.create: %d, want a crash, a power loss and a torn write; the probe saw %+v; cases %q", len(creates), pr.Durable, names)
		}
		create := &creates[0]
		// SQLite in WAL mode syncs a commit with fdatasync.
		if !strings.HasPrefix(create.Description, "ops.create after fdatasync 1 of 2:") {
			t.Errorf("the case's row: %q, want ops.create after fdatasync 1 of 2", create.Description)
		}
		for _, c := range creates {
			res := r.RunCase(context.Background(), c)
			if res.Verdict != verdict.Fail || !strings.Contains(strings.Join(res.Broken(), ","), "I5") {
				t.Errorf("%s: %s %v, notes %q; want FAIL I5", c.ID, res.Verdict, res.Broken(), res.Notes)
			}
			if power := strings.Contains(strings.Join(res.Notes, "; "), "power loss at ops.create after fdatasync 1 of 2 (worker fault)"); power != (c.Kind != faults.Crash) {
				t.Errorf("%s: a power loss noted %v, want %v: %q", c.ID, power, c.Kind != faults.Crash, res.Notes)
			}
			t.Logf("%s: %s %v; %q", c.ID, res.Verdict, res.Broken(), res.Notes)
		}
		// The same kill past the last step of the call never fires.
		k := *create.Steps[0].Durable
		k.Step = k.Steps + 1
		miss := r.RunCase(context.Background(), catalogue.DurableStepCase(k))
		if miss.Verdict != verdict.NotExercised || miss.NotExercised == nil || miss.NotExercised.Cause != verdict.CauseUnreachable {
			t.Errorf("a kill after a step the call never takes: %s %+v, notes %q; want not exercised", miss.Verdict, miss.NotExercised, miss.Notes)
		}
	})

	t.Run("one transaction", func(t *testing.T) {
		r := runner(pythonStore(t, "../../examples/python/sqlite_store.py"))
		cases, pr := sweep(r)
		creates := 0
		for _, c := range pr.Durable {
			if c.Method == "ops.create" {
				creates++
				if len(c.Ops) != 1 {
					t.Errorf("ops.create (call %d) of the one-transaction store took durable steps %q, want one", c.Call, c.Ops)
				}
			}
		}
		if creates == 0 {
			t.Fatalf("the probe saw no durable step of ops.create: %+v", pr.Durable)
		}
		rep := r.RunAll(context.Background(), cases, 2, nil)
		for _, res := range rep.Results {
			if res.Verdict != verdict.Pass {
				t.Errorf("%s on the correct store: %s %v, notes %q", res.Case.ID, res.Verdict, res.Broken(), res.Notes)
			}
		}
	})
}
