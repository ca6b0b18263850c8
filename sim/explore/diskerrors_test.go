package explore_test

import (
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/explore"
)

// With DiskErrors 1 the crashes the generator draws for an ingestion
// schedule become disk errors, every kind of them, at most one per
// worker (a second one in a worker stays a crash); with 0 (the default)
// none does.
func TestDiskErrorShareTurnsCrashesIntoDiskErrors(t *testing.T) {
	count := func(shape explore.Shape) (crashes int, disk map[faults.Kind]int) {
		disk = map[faults.Kind]int{}
		for i := 0; i < 200; i++ {
			c := explore.Schedule(5, i, shape)
			if c.System != faults.Ingestion {
				continue
			}
			for _, st := range c.Steps {
				n := 0
				for _, a := range st.Arms {
					switch {
					case a.Kind == faults.Crash:
						crashes++
					case a.Kind.IsDisk():
						disk[a.Kind]++
						n++
					}
				}
				if n > 1 {
					t.Fatalf("schedule %s: worker %s arms %d disk errors", c.ID, st.Worker, n)
				}
			}
		}
		return crashes, disk
	}
	if c, d := count(explore.DefaultShape); c == 0 || len(d) != 0 {
		t.Fatalf("default shape: %d crashes, disk errors %v; want crashes and no disk error", c, d)
	}
	all := explore.DefaultShape
	all.DiskErrors = 1
	if _, d := count(all); len(d) != len(faults.DiskKinds) {
		t.Fatalf("DiskErrors 1: disk errors %v; want every kind drawn", d)
	}
}
