// Package sim runs cases: the supervisor (Runner, NewRunner, Config)
// spawns each case's workers (package sim/worker: real processes killed
// with SIGKILL, or in-process goroutines that die without unwinding), arms
// their faults, acts on the machine for the faults outside a worker
// (power loss, disk errors, durable-step kills, server faults), collects
// the history, snapshots the stores and calls check. What it runs comes
// from package sim/catalogue, what a case showed goes into package
// sim/verdict.
//
// The worker side's public names (Backend, RegisterBackend, WorkerSpec,
// WorkerMain, ...) are kept here as aliases of sim/worker's.
package sim
