// Package sim runs cases: the supervisor (Runner, NewRunner, Config)
// starts each case's workers (package sim/execmode: real processes killed
// with SIGKILL, or in-process goroutines that die without unwinding, each
// running package sim/worker), has package sim/casefaults carry out the
// faults outside a worker (power loss, disk errors, durable-step kills,
// server faults), collects the history, snapshots the stores and calls
// check; RunAll orders a run's cases, calibrates and retries them. What
// it runs comes from package sim/catalogue, what a case showed goes into
// package sim/verdict.
//
// The public names of the worker side (Backend, RegisterBackend,
// WorkerSpec, WorkerMain, ...), of the launchers (BinaryLauncher,
// ReexecLauncher) and of the server faults (ServerFaults, ServerPower,
// ...) are kept here as aliases.
package sim
