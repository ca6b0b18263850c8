package cmdkit

import (
	"os"
	"runtime"
	"runtime/debug"
)

// TuneGC makes a run collect garbage less often: in-process runs allocate
// fast and keep little (the SQLite memory databases live outside the Go
// heap), so the default GOGC=100 spends a fifth of the CPU collecting; the
// supervisor of a process-mode run parses every case's history and reads
// every case's stores, and spent an eighth of its CPU collecting (perf
// profile of the full matrix). A GOGC set in the environment wins. It
// returns the function that restores the previous setting; false leaves
// the setting alone.
//
// GOGC=400 alone still collected every few MB, as little is live: each
// collection stops every goroutine of the running schedules for its stack
// scan (runtime.asyncPreempt was a tenth of explore's CPU profile). A
// ballast, a pointer-free allocation that is never touched (so it costs
// no resident memory and no marking), raises what counts as live, and
// with it the heap the next collection waits for, to a few hundred MB.
func TuneGC(on bool) func() {
	if !on || os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(400)
	ballast := make([]byte, gcBallast)
	return func() {
		runtime.KeepAlive(ballast)
		debug.SetGCPercent(old)
	}
}

// gcBallast is the size of TuneGC's ballast.
const gcBallast = 64 << 20

// TuneProcs lets the supervisor of a process-mode run have as many
// threads running Go code as it runs cases at once (GOMAXPROCS, never
// fewer than the cores). Each case's supervisor work (starting workers,
// reading the case's history and stores back, checking) waits for one of
// them. The supervisor does about a sixth of a matrix round's CPU work
// (bench prints its share), and with one thread per core the scheduler
// gives it two threads' share against every runnable worker process, its
// own and everyone else's, so that on a busy machine case slots wait for
// it with no worker running. (Measured on a 2-core machine under a load
// of 30-40: matrix rounds a little shorter, the supervisor's CPU a
// little higher from its idle threads looking for work.) The workers are
// processes of their own and keep their default. A GOMAXPROCS set in the
// environment wins. It returns the function that restores the previous
// setting. In-process runs keep the default: their cases are goroutines,
// not processes.
func TuneProcs(parallel int) func() {
	if os.Getenv("GOMAXPROCS") != "" {
		return func() {}
	}
	n := max(parallel, runtime.NumCPU())
	old := runtime.GOMAXPROCS(n)
	if old >= n {
		runtime.GOMAXPROCS(old)
	}
	return func() { runtime.GOMAXPROCS(old) }
}
