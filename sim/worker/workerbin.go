package worker

import (
	"context"
	"fmt"
	"os"
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
