// Package execmode runs the workers of a case, in one of two ways: as
// worker processes (the crashmatrix binary, a slim worker binary or a
// re-executed test binary) that a SIGKILL ends, with a deadline that
// reads their stacks when they hang; or as goroutines of this process
// sharing a simulated clock and the backend's handles, that die without
// unwinding. The runner (package sim) picks the mode per run, starts a
// case's workers through a Case and acts on their Workers; what it needs
// of the run is a Run.
package execmode

import (
	"sync"
	"time"

	"context"
	"os/exec"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// Run is what the two modes need of the run that starts their workers.
type Run struct {
	// Backend is the run's resolved backend.
	Backend worker.Backend
	// Launcher starts worker processes.
	Launcher Launcher
	// WorkDir holds the in-process mode's shared handles' data.
	WorkDir string
	// InProcessFiles keeps an embedded backend's data in files in the
	// in-process mode too.
	InProcessFiles bool
	// StepBackend is the backend a worker of spec opens (version B of an
	// upgrade once a worker died by a kill).
	StepBackend func(worker.WorkerSpec) worker.Backend
	// ProcessTimeout is the run's worker deadline now (it rises when the
	// run's timings do, while a worker runs).
	ProcessTimeout func() time.Duration
	// Snapshot opens the backend afresh (as a new process would), reads
	// the stores and distils the history.
	Snapshot func(ctx context.Context, c catalogue.Case, env worker.CaseEnv, space string, h history.Log) (check.Snapshot, check.Observed, error)
	// Observe distils a case's history into what the checkers need.
	Observe func(h history.Log, c catalogue.Case, space string) check.Observed
}

// Modes starts the workers of one runner's cases: it knows the worker
// processes running (KillAll) and holds the in-process mode's shared
// handles on the backend (CloseShared).
type Modes struct {
	run    Run
	procs  sync.Map // *exec.Cmd -> struct{}
	poolMu sync.Mutex
	pool   []*sharedStores // free in-process handles
	all    []*sharedStores
	opened int
}

// New returns the modes of a run.
func New(run Run) *Modes { return &Modes{run: run} }

// KillAll kills every worker process still running (Ctrl-C).
func (m *Modes) KillAll() {
	m.procs.Range(func(k, _ any) bool {
		if c := k.(*exec.Cmd); c.Process != nil {
			KillSession(c.Process.Pid, m.run.Backend.ChildProcesses)
		}
		return true
	})
}

// processTimeout is the run's worker deadline now (0 without a run).
func (m *Modes) processTimeout() time.Duration {
	if m.run.ProcessTimeout == nil {
		return 0
	}
	return m.run.ProcessTimeout()
}
