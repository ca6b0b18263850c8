package main

import "github.com/crashmatrix/crashmatrix/internal/tune"

// tuneGC is tune.GC: a run collects garbage less often.
func tuneGC(on bool) func() { return tune.GC(on) }

// tuneProcs is tune.Procs: a process-mode run's supervisor gets a thread
// per case it runs at once.
func tuneProcs(parallel int) func() { return tune.Procs(parallel) }
