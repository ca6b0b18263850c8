// Package casefaults carries out the faults a case arms outside its
// workers, on the machine the supervisor serves: power loss and torn
// writes (the case's lazy mount, or the servers' power), disk errors
// (fsync-error, disk-full, slow-sync), kills at a store's or a server's
// own durable steps, and the server faults (crash, ack-lost, conn-reset,
// pause, partition, clock jump) through a backend's ServerFaults. The
// runner (package sim) opens them for a case (OpenServers, MountPower),
// arms them around each worker (WatchDurable, WatchDisk, OwnEndpoints)
// and acts once a worker has ended (AfterDisk, AfterWorker); what they
// need of the run is a Run, of the case the workers it runs
// (sim/execmode.Case).
package casefaults

import (
	"context"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// Run is what the faults need of the run whose cases arm them.
type Run struct {
	// Backend is the run's resolved backend (its name, whether it is
	// embedded).
	Backend worker.Backend
	// InProcess says the workers are goroutines (sim/execmode): no
	// process to kill, no file to lose.
	InProcess bool
	// LazyData puts every case's data on a lazy mount (Config.LazyData).
	LazyData bool
	// WallClock says the workers keep the wall clock, not the case's
	// harness clock.
	WallClock bool
	// ServerFaults faults the backend's servers (nil: none).
	ServerFaults ServerFaults
	// LeaseTTL is the run's lease TTL now.
	LeaseTTL func() time.Duration
	// Snapshot opens the backend afresh at env (as a new process would),
	// reads the stores and distils the history.
	Snapshot func(ctx context.Context, c catalogue.Case, env worker.CaseEnv, space string, h history.Log) (check.Snapshot, check.Observed, error)
	// Observe distils a case's history into what the checkers need.
	Observe func(h history.Log, c catalogue.Case, space string) check.Observed
}

// Faults carries out the faults of one run's cases.
type Faults struct {
	run Run
	// servers lets the cases share the servers while server faults are
	// on: a restart must not fail the workers of a case that does not
	// expect it (see serverGate).
	servers serverGate
}

// New returns the faults of a run.
func New(run Run) *Faults { return &Faults{run: run} }
