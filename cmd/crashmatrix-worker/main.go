// Command crashmatrix-worker is the worker process the crashmatrix
// supervisor starts, kills and restarts: one simulated instance of the
// reference service. It is the `crashmatrix worker` subcommand without the
// CLI, the report writers and the container provisioning, so that each of
// the thousands of process starts of a run costs as little as possible.
// The supervisor uses it when it lies next to the crashmatrix binary.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/crashmatrix/crashmatrix/sim"
	_ "github.com/crashmatrix/crashmatrix/sim/embedded" // the sqlite and memory backends
	_ "github.com/crashmatrix/crashmatrix/sim/servers"  // the postgres backend
	_ "github.com/crashmatrix/crashmatrix/sim/storecmd" // stores in any language (--store-cmd)
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--floor" {
		return // bench's spawn floor: start and exit, nothing else
	}
	if len(os.Args) != 3 || os.Args[1] != "--spec" {
		fmt.Fprintln(os.Stderr, "usage: crashmatrix-worker --spec FILE (started by crashmatrix), or --floor (start and exit)")
		os.Exit(2)
	}
	spec, err := sim.ReadWorkerSpec(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashmatrix-worker:", err)
		os.Exit(2)
	}
	backend, err := sim.ResolveBackend(spec.Backend)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashmatrix-worker:", err)
		os.Exit(2)
	}
	if err := sim.RunWorker(context.Background(), spec, backend, sim.ProcessWorkerOptions()); err != nil {
		fmt.Fprintln(os.Stderr, "crashmatrix-worker:", err)
		os.Exit(2)
	}
}
