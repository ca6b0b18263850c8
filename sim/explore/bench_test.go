package explore_test

import (
	"context"
	"os"
	"runtime/debug"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/explore"
)

// BenchmarkExploreInProcess measures in-process exploration on the embedded
// default: schedules per second (each generated, run, checked).
func BenchmarkExploreInProcess(b *testing.B) { benchExplore(b, inProcessRunner(b, nil, "")) }

// BenchmarkExploreSimStore measures exploration on the simulated durable
// store (explore --sim-store).
func BenchmarkExploreSimStore(b *testing.B) { benchExplore(b, simStoreRunner(b, nil, "")) }

func benchExplore(b *testing.B, r *sim.Runner) {
	// The GC explore and bench run with (internal/tune: tune.GC): a
	// collection every few hundred MB, not every few MB.
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(400))
		gcBallast = make([]byte, 64<<20)
		defer func() { gcBallast = nil }()
	}
	b.ResetTimer()
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	// A context that can end, as the command's (Ctrl-C) can: drivers
	// watch such a context on every statement.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := explore.Run(ctx, r, explore.Options{Seed: 3, MaxSchedules: b.N, Parallel: parallelFromEnv()})
	b.ReportMetric(res.Rate(), "schedules/s")
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/schedule")
	if res.Finding != nil {
		b.Fatalf("reference violated %s", res.Finding.Invariant)
	}
}

// gcBallast holds tune.GC's ballast while a benchmark runs (a local that
// only a deferred runtime.KeepAlive uses is not kept alive).
var gcBallast []byte

func parallelFromEnv() int {
	if n, err := strconv.Atoi(os.Getenv("EXPLORE_PARALLEL")); err == nil && n > 0 {
		return n
	}
	return 2
}
