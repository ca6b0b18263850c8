package check

import (
	"slices"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference"
)

// The checkers cite the events that show a violation, so a report can
// highlight them; a lost operation is marked as the root cause.
func TestViolationsCiteTheirEvents(t *testing.T) {
	o := Observed{Prepared: map[string][]string{"op-a": {"fp"}}, Quiet: true, Events: []reference.Event{
		{Kind: reference.EvPrepared, OperationID: "op-a", DocumentID: "d1"},
		{Kind: reference.EvStateCommit, OperationID: "op-a", DocumentID: "d1", Expected: 0, Revision: 1},
		{Kind: reference.EvLeaseAcquire, DocumentID: "d1", Holder: "w1", Token: 2},
		{Kind: reference.EvStateCommit, OperationID: "op-b", DocumentID: "d1", Expected: 0, Revision: 1},
		{Kind: reference.EvLeaseAcquire, DocumentID: "d1", Holder: "w2", Token: 1},
	}}
	got := map[Invariant][]Violation{}
	for _, v := range Check(Snapshot{}, o) {
		got[v.Invariant] = append(got[v.Invariant], v)
	}
	if vs := got[I2]; len(vs) != 1 || !slices.Equal(vs[0].Events, []int{1, 3}) {
		t.Errorf("I2 lost update: got %+v, want one violation citing events 1 and 3", vs)
	}
	if vs := got[I7]; len(vs) != 1 || !slices.Equal(vs[0].Events, []int{2, 4}) {
		t.Errorf("I7 token did not grow: got %+v, want one violation citing events 2 and 4", vs)
	}
	if vs := got[I5]; len(vs) != 1 || !vs[0].RootCause || !slices.Equal(vs[0].Events, []int{0}) {
		t.Errorf("I5 lost operation: got %+v, want one root-cause violation citing event 0", vs)
	}
	for _, inv := range []Invariant{I2, I7} {
		for _, v := range got[inv] {
			if v.RootCause {
				t.Errorf("%s marked as a root cause: %+v", inv, v)
			}
		}
	}
}
