package explore

import (
	"reflect"
	"testing"

	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// Where the probe saw a call take two durable steps, schedules kill
// clients without faults right after one of them (a step of that call,
// never its last), and the draws come after every other: the same seed's
// schedules are otherwise unchanged. Where no call took two, nothing is
// drawn at all.
func TestSchedulesKillAfterDurableSteps(t *testing.T) {
	calls := []catalogue.DurableCall{
		{Call: 3, Method: "locks.tryAcquire", Hit: 1, Ops: []string{"fdatasync data/x.db-wal"}},
		{Call: 8, Method: "ops.create", Hit: 1, Ops: []string{"fdatasync data/x.db-wal", "fdatasync data/x.db-wal"}},
	}
	shape := DefaultShape
	shape.DurableKill, shape.DurableCalls = 0.5, calls
	single := DefaultShape
	single.DurableKill, single.DurableCalls = 0.5, calls[:1]
	killed := 0
	for i := 0; i < 200; i++ {
		c, plain := Schedule(7, i, shape), Schedule(7, i, DefaultShape)
		if got := Schedule(7, i, single); !reflect.DeepEqual(got, plain) {
			t.Fatalf("schedule %d: a store whose calls sync once changed the schedule", i)
		}
		for j, st := range c.Steps {
			k := st.Durable
			if k == nil {
				continue
			}
			killed++
			if k.Method != "ops.create" || k.Step != 1 || k.Steps != 2 || k.Op != "fdatasync" || k.Hit < 1 || k.Hit > len(st.Actions) || k.Power {
				t.Fatalf("schedule %d, worker %s: kill %+v", i, st.Worker, *k)
			}
			if len(st.Arms) > 0 || st.Background || st.Kill != nil || st.Worker == "quiesce" {
				t.Fatalf("schedule %d: a durable-step kill on worker %s, which has other faults or is no client: %+v", i, st.Worker, st)
			}
			plain.Steps[j].Durable = k
		}
		if !reflect.DeepEqual(c, plain) {
			t.Fatalf("schedule %d differs from the plain one by more than its durable-step kills", i)
		}
	}
	if killed == 0 {
		t.Fatal("200 schedules killed no client after a durable step")
	}
}

// Shrinking tries the schedule without the kill, with it at the method's
// first call, and as a plain kill without the power cut; the candidates
// do not share the kill with the case they came from.
func TestDurableKillShrinks(t *testing.T) {
	k := &catalogue.DurableKill{Method: "ops.create", Hit: 2, Step: 1, Steps: 2, Op: "fsync", Power: true}
	c := catalogue.Case{Steps: []catalogue.Step{{Worker: "w1", Actions: []catalogue.Action{{Do: "ingest"}, {Do: "ingest"}}, Durable: k}, {Worker: "quiesce"}}}
	var got []*catalogue.DurableKill
	for _, d := range candidates(c) {
		if len(d.Steps) == 2 && len(d.Steps[0].Actions) == 2 {
			got = append(got, d.Steps[0].Durable)
		}
	}
	want := []*catalogue.DurableKill{nil,
		{Method: "ops.create", Hit: 1, Step: 1, Steps: 2, Op: "fsync", Power: true},
		{Method: "ops.create", Hit: 2, Step: 1, Steps: 2, Op: "fsync"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("candidates' kills %+v, want %+v", got, want)
	}
	if *k != (catalogue.DurableKill{Method: "ops.create", Hit: 2, Step: 1, Steps: 2, Op: "fsync", Power: true}) {
		t.Fatalf("a candidate changed the original's kill: %+v", *k)
	}
	plain := c
	plain.Steps = []catalogue.Step{{Worker: "w1", Actions: c.Steps[0].Actions, Durable: want[2]}, c.Steps[1]}
	if !simpler(plain, c) || Size(c) != 3 {
		t.Fatalf("a kill without the power cut is not simpler, or the kill is not counted in the size (%d)", Size(c))
	}
}
