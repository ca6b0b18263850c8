package storecmd_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/storecmd"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// A store whose processes take longer to start than a worker's whole
// deadline (a JVM on a loaded machine; here a shell that sleeps before it
// execs the Python example store) still gets a decided case: the worker's
// deadline counts from its store's hello reply. Before, the worker was
// killed at its deadline while its store was still starting, and the case
// was undecided. The report says how long the starts took.
func TestSlowStoreStartIsNoReasonForAnUndecidedCase(t *testing.T) {
	store := pythonStore(t, filepath.Join("..", "..", "examples", "python", "sqlite_store.py"))
	const deadline = 4 * time.Second
	command := "sh -c " + shellQuote("sleep 5; exec "+store)
	r, err := sim.NewRunner(sim.Config{Backend: storecmd.Spec(command, "", "", 30*time.Second), WorkDir: t.TempDir(), Seed: 1,
		ProcessTimeout: deadline, Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.CloseShared()
	rep := r.RunAll(context.Background(), catalogue.CycleCases(1), 1, nil)
	// The report says how long the starts took: each worker's open of
	// its store waited out the 5s sleep.
	if !strings.HasPrefix(rep.StoreStarts, "store starts: median 5.") || !strings.Contains(rep.StoreStarts, "over 2 worker store opens") {
		t.Errorf("the report's store starts: %q; want two opens of about 5s", rep.StoreStarts)
	}
	for _, res := range rep.Results {
		if res.Verdict != verdict.Pass {
			t.Errorf("%s: %s (notes %q; violations %+v; workers %+v); want pass: the store's 5s start counted against the worker's %s deadline", res.Case.ID, res.Verdict, res.Notes, res.Violations, res.Workers, deadline)
		}
	}
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
