// Command crashmatrix-worker is the worker process the crashmatrix
// supervisor starts, kills and restarts for the embedded backends (sqlite
// and memory): one simulated instance of the reference service. It is the
// `crashmatrix worker` subcommand without the CLI, the report writers, the
// other backends' drivers and the container provisioning, so that each of
// the thousands of process starts of a run costs as little as possible.
// The supervisor uses it when it lies next to the crashmatrix binary
// (sim.BinaryLauncher); crashmatrix-worker-servers and
// crashmatrix-worker-storecmd are its siblings for the other backends.
package main

import (
	"os"

	_ "github.com/crashmatrix/crashmatrix/sim/embedded" // the sqlite and memory backends
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

func main() { os.Exit(worker.WorkerMain("crashmatrix-worker", os.Args[1:])) }
