package sim

import (
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
)

// Each disk error column has a case at every window where a crash
// applies, arming the kind at the window in the worker that goes on past
// it; the selection takes the columns its kinds ask for, on an embedded
// backend only.
func TestDiskMatrixAndSelection(t *testing.T) {
	crashes := 0
	for _, s := range faults.Catalogue {
		if s.Applies(faults.Crash) {
			crashes++
		}
	}
	for _, k := range faults.DiskKinds {
		cases := DiskMatrix(nil, k, 250)
		if len(cases) != crashes {
			t.Fatalf("%s: %d cases, want one per window where a crash applies (%d)", k, len(cases), crashes)
		}
		for _, c := range cases {
			if c.Kind != k || !strings.HasSuffix(c.ID, "-"+string(k)) || !armsDiskFault(c) {
				t.Fatalf("%s: case %s of kind %s, arms a disk error %v", k, c.ID, c.Kind, armsDiskFault(c))
			}
			st := c.Steps[len(c.Steps)-3]
			if p, a, ok := diskFaultOf(st); !ok || p != c.Point || a.Kind != k || a.Hit != 1 || st.Background {
				t.Fatalf("%s: step %s arms %v at %s, want %s@1 at %s in a foreground worker", c.ID, st.Worker, a, p, k, c.Point)
			}
		}
	}
	if _, ok := DiskCase(faults.Catalogue[0], faults.Crash, 250); ok {
		t.Error("DiskCase made a case of a crash")
	}
	r := &Runner{backend: Backend{Embedded: true}}
	sel := Selection{Kinds: []faults.Kind{faults.Crash, faults.SlowSync, faults.FsyncError}}
	if err := r.selectDisk(&sel); err != nil || len(sel.Disk) != 2 || sel.Disk[0] != faults.SlowSync || sel.Disk[1] != faults.FsyncError {
		t.Fatalf("embedded: %v, columns %v", err, sel.Disk)
	}
	r.backend.Embedded = false
	if err := r.selectDisk(&sel); err == nil || !strings.Contains(err.Error(), "--kind slow-sync: disk errors: not tested (") {
		t.Fatalf("a server backend took the disk error columns: %v", err)
	}
}

// At durable steps, each fsync or fdatasync of a method's first call that
// took two steps or more gets the error right before it; renames and
// unlinks do not, nor calls of one step.
func TestDurableDiskCases(t *testing.T) {
	calls := []DurableCall{
		{Call: 1, Method: "ops.get", Ops: []string{"fsync data/x"}},
		{Call: 2, Method: "ops.create", Ops: []string{"fdatasync data/x-wal", "rename data/y", "fsync data"}},
		{Call: 3, Method: "ops.create", Ops: []string{"fsync data/x-wal", "fsync data/x"}},
	}
	cases := DurableDiskCases(calls, faults.DiskFull)
	var ids []string
	for _, c := range cases {
		ids = append(ids, c.ID)
		k := c.Steps[0].Durable
		if c.Kind != faults.DiskFull || k == nil || k.Disk != faults.DiskFull || k.Call != 2 || !IsDurableStep(c) || c.Class != c.ID {
			t.Fatalf("%s: kind %s, kill %+v", c.ID, c.Kind, k)
		}
	}
	if want := "durable-step-ops.create-1-of-3-disk-full durable-step-ops.create-3-of-3-disk-full"; strings.Join(ids, " ") != want {
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
