package explore_test

import (
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/explore"
)

// With PowerLoss 1 every crash the generator draws for an ingestion
// schedule cuts the power instead; with 0 (the default) none does.
func TestPowerLossShareTurnsCrashesIntoPowerLosses(t *testing.T) {
	count := func(shape explore.Shape) (crashes, losses, torn int) {
		for i := 0; i < 200; i++ {
			c := explore.Schedule(5, i, shape)
			if c.System != faults.Ingestion {
				continue // plan-save schedules arm the catalogue's kinds as they are
			}
			for _, st := range c.Steps {
				for _, a := range st.Arms {
					switch a.Kind {
					case faults.Crash:
						crashes++
					case faults.PowerLoss:
						losses++
					case faults.TornWrite:
						torn++
					}
				}
			}
		}
		return
	}
	if c, l, n := count(explore.DefaultShape); c == 0 || l != 0 || n != 0 {
		t.Fatalf("default shape: %d crashes, %d power losses, %d torn; want crashes and no power loss", c, l, n)
	}
	all := explore.DefaultShape
	all.PowerLoss = 1
	if c, l, n := count(all); c != 0 || l == 0 || n != 0 {
		t.Fatalf("PowerLoss 1: %d crashes, %d power losses, %d torn; want every crash a plain power loss", c, l, n)
	}
	// TornWrite is the share of those power losses that tear.
	all.TornWrite = 0.5
	if c, l, n := count(all); c != 0 || l == 0 || n == 0 {
		t.Fatalf("PowerLoss 1, TornWrite 0.5: %d crashes, %d power losses, %d torn; want both kinds of power loss", c, l, n)
	}
	all.TornWrite = 1
	if c, l, n := count(all); c != 0 || l != 0 || n == 0 {
		t.Fatalf("PowerLoss 1, TornWrite 1: %d crashes, %d power losses, %d torn; want every power loss torn", c, l, n)
	}
	// Tear is the unit each drawn torn write carries: pages by default
	// (0), or what was asked for, down to a byte.
	for _, tear := range []int{faults.TearPage, faults.TearSector, faults.TearByte} {
		all.Tear = tear
		want := tear
		if tear == faults.TearPage {
			want = 0
		}
		for i := 0; i < 50; i++ {
			for _, st := range explore.Schedule(5, i, all).Steps {
				for p, a := range st.Arms {
					if a.Kind == faults.TornWrite && a.Tear != want {
						t.Fatalf("Tear %d: schedule %d arms %v at %s, want the tear %d", tear, i, a, p, want)
					}
				}
			}
		}
	}
}
