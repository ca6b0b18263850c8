package explore_test

import (
	"context"
	"os"
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
	b.ResetTimer()
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	res := explore.Run(context.Background(), r, explore.Options{Seed: 3, MaxSchedules: b.N, Parallel: parallelFromEnv()})
	b.ReportMetric(res.Rate(), "schedules/s")
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/schedule")
	if res.Finding != nil {
		b.Fatalf("reference violated %s", res.Finding.Invariant)
	}
}

func parallelFromEnv() int {
	if n, err := strconv.Atoi(os.Getenv("EXPLORE_PARALLEL")); err == nil && n > 0 {
		return n
	}
	return 2
}
