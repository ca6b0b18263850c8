package main

import (
	"syscall"
	"time"

	"github.com/crashmatrix/crashmatrix/internal/cmdkit"
)

// tuneGC and tuneProcs tune the Go runtime for a run (cmdkit).
var (
	tuneGC    = cmdkit.TuneGC
	tuneProcs = cmdkit.TuneProcs
)

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
