package explore_test

import (
	"reflect"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/explore"
)

// With ServerHolds the generator draws the faults that hold a request
// past the lease (server-pause, partition, clock-jump) where the server
// can take them and the window means something for them: every kind, in
// a background worker, one a schedule and no other server fault beside
// it; a server that takes only partitions (a server given by DSN) gets
// only those. With ServerHolds 0 the schedules are those drawn before.
func TestServerHoldsAreDrawnWhereTheyApply(t *testing.T) {
	shape := explore.DefaultShape
	shape.Servers = []string{"neo4j", "postgres"}
	base := shape
	shape.Holds = map[string][]faults.Kind{"postgres": faults.ServerOptInKinds, "neo4j": {faults.Partition}}
	for i := 0; i < 200; i++ {
		if a, b := explore.Schedule(3, i, base), explore.Schedule(3, i, shape); !reflect.DeepEqual(a, b) {
			t.Fatalf("schedule %d: Holds without ServerHolds changed it:\n%+v\n%+v", i, a, b)
		}
	}
	shape.ServerHolds = 1
	drawn := map[string]int{}
	for i := 0; i < 400; i++ {
		c := explore.Schedule(3, i, shape)
		holds, others := 0, 0
		for _, st := range c.Steps {
			for p, a := range st.Arms {
				switch {
				case a.Kind.HoldsPastLease():
					holds++
					drawn[a.Server+" "+string(a.Kind)]++
					spec, _ := faults.Lookup(p)
					if !spec.AppliesServer(a.Kind, a.Server) || !st.Background {
						t.Errorf("schedule %s: %s on %s at %s (background %v): not where it applies", c.ID, a.Kind, a.Server, p, st.Background)
					}
				case a.Kind.IsServer():
					others++
				}
			}
		}
		if holds > 1 || holds == 1 && others > 0 {
			t.Errorf("schedule %s: %d holding faults and %d other server faults", c.ID, holds, others)
		}
	}
	for _, want := range []string{"postgres server-pause", "postgres partition", "postgres clock-jump", "neo4j partition"} {
		if drawn[want] == 0 {
			t.Errorf("never drawn: %s (drawn: %v)", want, drawn)
		}
	}
	for k := range drawn {
		if k == "neo4j server-pause" || k == "neo4j clock-jump" {
			t.Errorf("drawn where the server cannot take it: %s", k)
		}
	}
	t.Logf("400 schedules: %v", drawn)
}
