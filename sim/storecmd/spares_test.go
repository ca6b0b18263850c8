package storecmd_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/internal/procstat"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/storecmd"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// A worker's store process is started ahead of need by the supervisor
// while the cases before run (storeproc.Spares): a store whose every
// start takes a second (a shell that sleeps, then execs the Python
// example store) opens in a worker in less than that once spares are
// ready, the cases' verdicts are what they were, and nothing of the
// store is left running after the run, nor a child each store process
// leaves behind in its group (a worker that started its own store process
// has its session swept, one that took spares only has them killed with
// it). Before, every worker started its own store process: each open took
// the whole second.
func TestWorkersTakeStoreProcessesStartedAheadOfNeed(t *testing.T) {
	store := pythonStore(t, filepath.Join("..", "..", "examples", "python", "sqlite_store.py"))
	const sleep = time.Second
	pids := filepath.Join(t.TempDir(), "pids")
	command := "sh -c " + shellQuote("echo $$ >> "+shellQuote(pids)+"; sleep 600 </dev/null >/dev/null 2>&1 & echo $! >> "+shellQuote(pids)+"; sleep 1; exec "+store)
	r, err := sim.NewRunner(sim.Config{Backend: storecmd.Spec(command, "", "", 30*time.Second), WorkDir: t.TempDir(), Seed: 1,
		Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}})
	if err != nil {
		t.Fatal(err)
	}
	rep := r.RunAll(context.Background(), catalogue.CycleCases(4), 1, nil)
	r.CloseShared()
	var opens []time.Duration
	for _, res := range rep.Results {
		if res.Verdict != verdict.Pass {
			t.Errorf("%s: %s (notes %q; violations %+v); want pass", res.Case.ID, res.Verdict, res.Notes, res.Violations)
		}
		for _, w := range res.Workers {
			opens = append(opens, w.StoreStarts...)
		}
	}
	quick := 0
	for _, d := range opens {
		if d < sleep {
			quick++
		}
	}
	// A store process started for the open itself takes the second at
	// least; one taken ready answers its hello at once.
	if len(opens) != 8 || quick == 0 {
		t.Errorf("worker store opens %v: %d quicker than a start (%s); want 8 opens, some of them spares", opens, quick, sleep)
	}
	b, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		// A process killed a moment ago may not have ended yet.
		st, err := procstat.Read(pid)
		for end := time.Now().Add(2 * time.Second); err == nil && !st.Gone() && time.Now().Before(end); st, err = procstat.Read(pid) {
			time.Sleep(20 * time.Millisecond)
		}
		if err == nil && !st.Gone() {
			t.Errorf("store process %d (%s, state %c, session %d, group %d, parent %d) still runs after the run", pid, st.Comm, st.State, st.Session, st.PGRP, st.PPID)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
