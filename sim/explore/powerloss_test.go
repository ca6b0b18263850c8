package explore_test

import (
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/explore"
)

// With PowerLoss 1 every crash the generator draws for an ingestion
// schedule cuts the power instead; with 0 (the default) none does.
func TestPowerLossShareTurnsCrashesIntoPowerLosses(t *testing.T) {
	count := func(shape explore.Shape) (crashes, losses int) {
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
					}
				}
			}
		}
		return
	}
	if c, l := count(explore.DefaultShape); c == 0 || l != 0 {
		t.Fatalf("default shape: %d crashes, %d power losses; want crashes and no power loss", c, l)
	}
	all := explore.DefaultShape
	all.PowerLoss = 1
	if c, l := count(all); c != 0 || l == 0 {
		t.Fatalf("PowerLoss 1: %d crashes, %d power losses; want every crash a power loss", c, l)
	}
}
