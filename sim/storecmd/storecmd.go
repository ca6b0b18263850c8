// Package storecmd registers the "store-cmd" backend: stores written in
// any language, run as child processes that speak the store protocol
// (docs/store-protocol.md, adapters/storeproc). `crashmatrix certify
// --store-cmd CMD [--plansave-cmd CMD]` resolves to it.
//
// A store process is the store's client code in the service's process:
// each worker starts its own, as its child leading a process group of its
// own in the worker's session, with the parent-death signal set, so a
// worker killed at a window, at a random instant or at its deadline takes
// its store processes with it (the supervisor ends the worker's session),
// and a store process that is killed takes whatever it started with it. Their data
// lives in the case's directory (hello's dir, $CRASHMATRIX_STORE_DIR); their
// logs (store-<pid>.log, all of each one's stderr) in the case's log
// folder (worker.CaseEnv.Logs), never among the store's files.
package storecmd

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// Name is the backend's registered name.
const Name = "store-cmd"

// The BackendSpec.Args keys.
const (
	// ArgCommand is System A's store command.
	ArgCommand = "cmd"
	// ArgPlanSaveCommand is System B's store command (checkpoints, plans).
	ArgPlanSaveCommand = "plansave-cmd"
	// ArgWorkDir is the directory the commands run in (relative paths in
	// them are relative to it).
	ArgWorkDir = "workdir"
	// ArgTimeout bounds the start of a store process (its hello) and each
	// message of a call (a Go duration).
	ArgTimeout = "timeout"
)

// ProtocolErrorExit is the exit code of a worker whose store broke the
// protocol: the supervisor sees a worker that failed (not one killed) and
// the case is undecided.
const ProtocolErrorExit = 3

// SparesKept is how many store processes of each command the supervisor
// keeps started ahead of need for its workers (a case starts up to three
// at once).
const SparesKept = 2

func init() {
	worker.RegisterBackend(Name, Backend)
	// A spare a worker took dies with the worker's session, and counts
	// as one of its processes.
	worker.RegisterAdopter(worker.Adopter{Kill: storeproc.KillAdopted, SessionOf: storeproc.AdoptedBy})
}

// Spec builds the backend spec for the commands, run in workDir.
func Spec(command, planSaveCommand, workDir string, timeout time.Duration) worker.BackendSpec {
	args := map[string]string{ArgWorkDir: workDir}
	if command != "" {
		args[ArgCommand] = command
	}
	if planSaveCommand != "" {
		args[ArgPlanSaveCommand] = planSaveCommand
	}
	if timeout > 0 {
		args[ArgTimeout] = timeout.String()
	}
	return worker.BackendSpec{Name: Name, Args: args}
}

// Backend builds the backend a spec names.
func Backend(spec worker.BackendSpec) (worker.Backend, error) {
	a := spec.Args
	if strings.TrimSpace(a[ArgCommand]) == "" && strings.TrimSpace(a[ArgPlanSaveCommand]) == "" {
		return worker.Backend{}, fmt.Errorf("backend %s: no store command (--store-cmd, --plansave-cmd)", Name)
	}
	var timeout time.Duration
	if s := a[ArgTimeout]; s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return worker.Backend{}, fmt.Errorf("backend %s: timeout %q: want a positive duration such as 10s", Name, s)
		}
		timeout = d
	}
	// The supervisor's store processes (a snapshot after a case, an
	// initial-state load before it) wait in the pool between cases when
	// the store declares reopen; a worker's never do (they die with it).
	pool := storeproc.NewPool()
	// The workers' store processes are started ahead of need, while the
	// cases before theirs run: a worker takes one that has answered hello
	// already (storeproc.Spares), which dies with the worker as one it
	// started would (worker.RegisterAdopter, below). A store that does not declare
	// reopen gets none.
	var spares *storeproc.Spares
	if !worker.InWorkerProcess() {
		spares, _ = storeproc.NewSpares(SparesKept, a[ArgWorkDir], a[ArgCommand], a[ArgPlanSaveCommand])
	}
	opts := func(command string, env worker.CaseEnv, require []string) storeproc.Options {
		o := storeproc.Options{Command: command, WorkDir: a[ArgWorkDir], Dir: env.Dir, LogDir: env.Logs, TempDir: env.TempDir, Namespace: env.Namespace, Mutant: env.Mutant,
			Timeout: timeout, HelloTimeout: timeout, Require: require, OnProtocolError: endWorker}
		if worker.InWorkerProcess() {
			o.Spare = true
			o.BeforeStart = worker.NoteSpawn
		} else {
			o.Pool = pool
		}
		return o
	}
	b := worker.Backend{
		Name:           Name,
		Embedded:       true,
		ChildProcesses: true,
		SpawnsNoted:    true,
		// A worker's deadline counts from its store processes' hello
		// replies: a JVM that starts slowly on a busy machine does not
		// make the case undecided. The start itself stays bounded (the
		// hello timeout kills a store that does not answer).
		StartTimeout: startLimit(timeout),
		Close: func() error {
			if spares != nil {
				_ = spares.Close()
			}
			return pool.Close()
		},
		Open: func(ctx context.Context, env worker.CaseEnv) (reference.Stores, error) {
			if a[ArgCommand] == "" {
				return reference.Stores{}, fmt.Errorf("backend %s: System A needs --store-cmd (only --plansave-cmd was given)", Name)
			}
			c, err := storeproc.Start(ctx, opts(a[ArgCommand], env, []string{storeproc.StoreOperations, storeproc.StoreStates,
				storeproc.StoreRegistry, storeproc.StoreGraph, storeproc.StoreLocks}))
			if err != nil {
				return reference.Stores{}, err
			}
			return c.Stores(), nil
		},
	}
	if a[ArgPlanSaveCommand] != "" {
		b.OpenPlanSave = func(ctx context.Context, env worker.CaseEnv) (worker.PlanSaveStores, error) {
			c, err := storeproc.Start(ctx, opts(a[ArgPlanSaveCommand], env, []string{storeproc.StoreCheckpoints, storeproc.StorePlans}))
			if err != nil {
				return worker.PlanSaveStores{}, err
			}
			return worker.PlanSaveStores{Checkpoints: c.Checkpoints(), Plans: c.Plans(), Closer: c}, nil
		}
	}
	return b, nil
}

// endWorker ends a worker process whose store broke the protocol: the
// conversation cannot be trusted, so the case must not be judged on it.
// Outside a worker (no fault runtime in ctx: the supervisor's snapshot,
// a conformance test) the error is returned as it is.
func endWorker(ctx context.Context, err *storeproc.ProtocolError) {
	if faults.RuntimeFrom(ctx) == nil || !worker.InWorkerProcess() {
		return
	}
	what := "broke the store protocol"
	if err.NoStart {
		what = "did not start"
	}
	fmt.Fprintf(os.Stderr, "crashmatrix worker: the store %s: %v\n", what, err)
	os.Exit(ProtocolErrorExit)
}

// startLimit is how long one open of a worker's stores may take: its store
// process's start up to the hello timeout, and a second for the exec.
func startLimit(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		timeout = storeproc.DefaultHelloTimeout
	}
	return timeout + time.Second
}
