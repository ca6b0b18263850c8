package catalogue

import (
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
)

// At durable steps, each fsync or fdatasync of each shape of call that
// took two steps or more gets the error right before it (a later call of
// ops.create that syncs twice, not three times, is a shape of its own);
// renames and unlinks do not, nor calls of one step.
func TestDurableDiskCases(t *testing.T) {
	calls := []DurableCall{
		{Call: 1, Method: "ops.get", Hit: 1, Ops: []string{"fsync data/x"}},
		{Call: 2, Method: "ops.create", Hit: 1, Ops: []string{"fdatasync data/x-wal", "rename data/y", "fsync data"}},
		{Call: 3, Method: "ops.create", Hit: 2, Ops: []string{"fsync data/x-wal", "fsync data/x"}},
		{Call: 4, Method: "ops.create", Hit: 3, Ops: []string{"fdatasync data/x-wal", "rename data/z", "fsync data"}},
	}
	cases := DurableDiskCases(calls, faults.DiskFull)
	var ids []string
	for _, c := range cases {
		ids = append(ids, c.ID)
		k := c.Steps[0].Durable
		if c.Kind != faults.DiskFull || k == nil || k.Disk != faults.DiskFull || (k.Call != 2 && k.Call != 3) || !IsDurableStep(c) || c.Class != c.ID {
			t.Fatalf("%s: kind %s, kill %+v", c.ID, c.Kind, k)
		}
	}
	if want := "durable-step-ops.create-1-of-3-disk-full durable-step-ops.create-3-of-3-disk-full durable-step-ops.create-call2-1-of-2-disk-full durable-step-ops.create-call2-2-of-2-disk-full"; strings.Join(ids, " ") != want {
		t.Fatalf("cases %v, want %s", ids, want)
	}
	sel := Selection{Kinds: []faults.Kind{faults.DiskFull}, Disk: []faults.Kind{faults.DiskFull}, Classes: []string{"durable-step-ops.create-3-of-3-disk-full"}}
	if got := sel.durableDisk(calls); len(got) != 1 || got[0].ID != "durable-step-ops.create-3-of-3-disk-full" {
		t.Fatalf("a class selects its own case: %v", got)
	}
	sel.Classes, sel.Points = nil, []faults.Point{faults.BeforePrepare}
	if got := sel.durableDisk(calls); len(got) != 0 {
		t.Fatalf("a point selects no durable step: %v", got)
	}
}
