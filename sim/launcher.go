package sim

import "github.com/crashmatrix/crashmatrix/sim/execmode"

// The two ways a case's workers run (processes, goroutines) live in
// sim/execmode; these names keep the API users' tests and commands know
// as sim's.

type (
	// Launcher is execmode.Launcher: it starts worker processes.
	Launcher = execmode.Launcher
	// BinaryLauncher is execmode.BinaryLauncher (the crashmatrix binary,
	// or the slim worker binary next to it).
	BinaryLauncher = execmode.BinaryLauncher
	// ReexecLauncher is execmode.ReexecLauncher (a re-executed Go test
	// binary).
	ReexecLauncher = execmode.ReexecLauncher
)

// Names of sim/execmode, kept in sim.
const (
	WorkerSpecEnv     = execmode.WorkerSpecEnv
	ServersAtDeadline = execmode.ServersAtDeadline
	SyncStall         = execmode.SyncStall
)
