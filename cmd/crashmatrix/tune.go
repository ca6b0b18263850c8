package main

import (
	"os"
	"runtime/debug"
	"syscall"
	"time"
)

// tuneGC makes a run collect garbage less often: in-process runs allocate
// fast and keep little (the SQLite memory databases live outside the Go
// heap), so the default GOGC=100 spends a fifth of the CPU collecting; the
// supervisor of a process-mode run parses every case's history and reads
// every case's stores, and spent an eighth of its CPU collecting (perf
// profile of the full matrix). A GOGC set in the environment wins. It
// returns the function that restores the previous setting; false leaves
// the setting alone.
func tuneGC(on bool) func() {
	if !on || os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(400)
	return func() { debug.SetGCPercent(old) }
}

// cpuTime is the CPU time (user + system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuTimeWithChildren is the CPU time (user + system) the process and
// every child it waited for have used: a run's own and its workers'.
func cpuTimeWithChildren() time.Duration {
	var self, kids syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids) != nil {
		return 0
	}
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + kids.Utime.Nano() + kids.Stime.Nano())
}

func shmAvailable() bool {
	st, err := os.Stat("/dev/shm")
	return err == nil && st.IsDir()
}
