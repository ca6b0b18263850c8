package worker

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// workerBinaries names each registered backend's slim worker binary
// (cmd/<name>), which links that backend and no other: the embedded
// stores', the servers' (the PostgreSQL and Neo4j drivers) and store-cmd's
// (no store in Go at all).
var workerBinaries = map[string]string{
	"sqlite":    "crashmatrix-worker",
	"memory":    "crashmatrix-worker",
	"postgres":  "crashmatrix-worker-servers",
	"store-cmd": "crashmatrix-worker-storecmd",
}

// singleThreaded are the backends whose worker processes run their store
// in the process itself and start no process of their own (the embedded
// ones): WorkerRuntimeEnv gives them GOMAXPROCS=1.
var singleThreaded = map[string]bool{"sqlite": true, "memory": true}

// WorkerRuntimeEnv is what a worker process of backend gets in its
// environment on top of the supervisor's, given env, the environment it
// would otherwise get: GOMAXPROCS=1 for the embedded backends, whose
// workers run one action at a time in one goroutine and wait for nothing
// but their own system calls (the lease renewals and the kill timers
// are goroutines that sleep), unless env sets GOMAXPROCS itself. With one
// P, a goroutine that becomes runnable never wakes a second thread to run
// it: the runtime starts fewer threads, and switches and faults in fewer
// pages. Measured side by side in one matrix run (alternate workers of
// the same cases with and without it, 1740 workers each): 2% less CPU per
// worker, 8% fewer page faults, 14% fewer context switches. Store-cmd
// workers keep the default: their store processes inherit the
// environment, and a store written in Go must keep its own.
func WorkerRuntimeEnv(backend string, env []string) []string {
	if !singleThreaded[backend] {
		return nil
	}
	for _, e := range env {
		if strings.HasPrefix(e, "GOMAXPROCS=") {
			return nil
		}
	}
	return []string{"GOMAXPROCS=1"}
}

// WorkerBinary is the name of the slim worker binary that runs backend's
// workers, "" for a backend that has none (its workers run from
// `crashmatrix worker`).
func WorkerBinary(backend string) string { return workerBinaries[backend] }

// WorkerMain is the main function of a slim worker binary (cmd/<prog>),
// whose imports register the backends it runs: `<prog> --spec FILE` runs
// one worker, `<prog> --floor` starts and exits (bench's measure of a
// worker's start). It returns the process's exit code.
func WorkerMain(prog string, args []string) int {
	if len(args) == 1 && args[0] == "--floor" {
		return 0 // start and exit, nothing else
	}
	if len(args) != 2 || args[0] != "--spec" {
		fmt.Fprintf(os.Stderr, "usage: %s --spec FILE (started by crashmatrix), or --floor (start and exit)\n", prog)
		return 2
	}
	spec, err := ReadWorkerSpec(args[1])
	if err == nil {
		var backend Backend
		if backend, err = ResolveBackend(spec.Backend); err == nil {
			err = RunWorker(context.Background(), spec, backend, ProcessWorkerOptions())
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
		return 2
	}
	return 0
}
