// Package worker is one worker of a case: the process the supervisor
// (package sim) starts, kills and restarts, or, in the in-process mode, a
// goroutine that dies without unwinding. RunWorker runs a WorkerSpec's
// actions on the reference service (or on a service of the user's through
// the service protocol, ServiceSpec) over a Backend's stores, with the
// worker's faults.Runtime in its context, and records everything in the
// case's history: what it meant to do, what its stores saw (the thin
// store wrappers of observe.go) and what each call returned.
//
// It also holds the backend registry (RegisterBackend, ResolveBackend,
// RegisterAdopter) and what a worker shares with its supervisor through
// the case's folder: the harness clock (clock.go), the stopped lease
// holders (deadholder.go), the store-open times (starts.go) and the mark
// files of durable steps and disk errors (marks.go). WorkerMain is the main
// function of the slim worker binaries (cmd/crashmatrix-worker...), which
// link this package and their backend, never the runner: of sim it
// imports only the catalogue (the Action a step runs, the Case a service
// can run).
package worker
