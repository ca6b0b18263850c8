package explore_test

import (
	"context"
	"testing"

	"github.com/crashmatrix/crashmatrix/sim/explore"
)

// BenchmarkExploreInProcess measures in-process exploration on the embedded
// default: schedules per second (each generated, run, checked).
func BenchmarkExploreInProcess(b *testing.B) {
	r := inProcessRunner(b, nil, "")
	b.ResetTimer()
	res := explore.Run(context.Background(), r, explore.Options{Seed: 3, MaxSchedules: b.N, Parallel: 2})
	b.ReportMetric(res.Rate(), "schedules/s")
	if res.Finding != nil {
		b.Fatalf("reference violated %s", res.Finding.Invariant)
	}
}
