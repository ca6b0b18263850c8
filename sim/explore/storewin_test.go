package explore_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/explore"
)

// Schedules arm the windows a store declared and random-instant kills
// when the shape asks for them, and stay what they were when it does not.
func TestSchedulesKnowStoreWindowsAndRandomKills(t *testing.T) {
	w := catalogue.StoreWindow{Point: "teststore/afterRow", System: faults.Ingestion, Methods: []string{"teststore.(*Ops).Create"}, Hits: 4}
	plain := explore.DefaultShape
	withStore := plain
	withStore.StoreWindows = []catalogue.StoreWindow{w}
	withKills := plain
	withKills.RandomKill, withKills.KillBase = 1, 50*time.Millisecond
	anchored := withKills
	anchored.KillCalls, anchored.KillCommits = 40, 12
	armed, kills, atCall, atCommit := 0, 0, 0, 0
	for i := 0; i < 300; i++ {
		c := explore.Schedule(5, i, plain)
		if !reflect.DeepEqual(c, explore.Schedule(5, i, explore.DefaultShape)) {
			t.Fatalf("schedule %d is not deterministic", i)
		}
		for _, st := range explore.Schedule(5, i, withStore).Steps {
			if _, ok := st.Arms[w.Point]; ok {
				armed++
			}
		}
		k := explore.Schedule(5, i, withKills)
		if !reflect.DeepEqual(k, explore.Schedule(5, i, withKills)) {
			t.Fatalf("schedule %d with random kills is not deterministic", i)
		}
		for _, st := range k.Steps {
			if st.Kill == nil {
				continue
			}
			kills++
			if st.Kill.Offset <= 0 || st.Kill.Offset > withKills.KillBase || st.Kill.Offset != catalogue.KillOffset(st.Kill.Seed, withKills.KillBase) {
				t.Fatalf("schedule %d worker %s: kill %+v, want an offset in (0, %s] drawn from its seed", i, st.Worker, st.Kill, withKills.KillBase)
			}
			if explore.Size(k) <= len(st.Actions) {
				t.Fatalf("Size does not count the kill")
			}
		}
	}
	for i := 0; i < 300; i++ {
		for _, st := range explore.Schedule(5, i, anchored).Steps {
			if st.Kill != nil {
				t.Fatalf("schedule %d worker %s: a wall-clock kill where the probe counted calls and commits", i, st.Worker)
			}
			if a, ok := st.Arms[faults.StoreCall]; ok && a.Kind == faults.Crash {
				atCall++
				if a.Hit < 1 || a.Hit > anchored.KillCalls {
					t.Fatalf("schedule %d: a kill at store call %d of %d", i, a.Hit, anchored.KillCalls)
				}
			}
			if a, ok := st.Arms[faults.StoreCommit]; ok {
				atCommit++
				if a.Kind != faults.Crash || a.Hit < 1 || a.Hit > anchored.KillCommits {
					t.Fatalf("schedule %d: %s at storeCommit, want a crash at one of %d commits", i, a, anchored.KillCommits)
				}
			}
		}
	}
	if atCall == 0 || atCommit == 0 {
		t.Errorf("300 schedules with anchored kills drew %d at a store call and %d at a commit, want both", atCall, atCommit)
	}
	if armed == 0 {
		t.Errorf("300 schedules never armed the store window %s", w.Point)
	}
	if kills == 0 {
		t.Errorf("300 schedules with RandomKill 1 drew no kill")
	}
}
