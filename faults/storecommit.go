package faults

import (
	"context"
	"sync/atomic"
)

// StoreCommit is a pseudo-point like StoreCall, one level down: the
// instant a write transaction of the worker process's embedded database
// is about to commit (SQLite's commit hook, installed by the embedded
// backend). A crash armed there ("crash@j") kills the worker inside a
// store call, after the call's earlier transactions committed and before
// its j-th commit of the run is durable: a kill the harness places, and a
// replay places again, where only a wall-clock kill landed before (a store
// method that commits twice). As SQLite rolls back a transaction that was
// not committed, every state of the database a kill at a random instant
// can leave is the state before some commit: the commits are every
// instant that matters to the database, numbered.
//
// It is reached only in a worker process (CommitsTo), never in the
// in-process mode, whose workers share one process and one database. Only
// crash applies: a pause inside a commit would hold the database's lock.
const StoreCommit Point = "storeCommit"

// StoreCommitSpec is StoreCommit as a catalogue entry, for Lookup.
var StoreCommitSpec = Spec{StoreCommit, Ingestion, "the commit of the embedded database's next write transaction",
	"inside a store call, before its next write transaction commits (the hit-th write commit of the worker process)",
	"whatever the store committed before the kill must leave the protocol recoverable",
	[]Kind{Crash}, false}

var commitRuntime atomic.Pointer[Runtime]

// CommitsTo makes rt the runtime every write commit of this process passes
// through (AtCommit); nil stops that. A worker process, which has one
// runtime, calls it.
func CommitsTo(rt *Runtime) { commitRuntime.Store(rt) }

// AtCommit is called by a database's commit hook before a write
// transaction commits: the StoreCommit pseudo-point, when a runtime takes
// this process's commits.
func AtCommit() {
	if rt := commitRuntime.Load(); rt != nil {
		_ = rt.At(context.Background(), StoreCommit, func() error { return nil })
	}
}
