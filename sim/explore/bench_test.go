package explore_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/crashmatrix/crashmatrix/sim/explore"
)

// BenchmarkExploreInProcess measures in-process exploration on the embedded
// default: schedules per second (each generated, run, checked).
func BenchmarkExploreInProcess(b *testing.B) {
	r := inProcessRunner(b, nil, "")
	b.ResetTimer()
	res := explore.Run(context.Background(), r, explore.Options{Seed: 3, MaxSchedules: b.N, Parallel: parallelFromEnv()})
	b.ReportMetric(res.Rate(), "schedules/s")
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
