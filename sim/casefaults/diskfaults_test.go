package casefaults

import (
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/worker"
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
		cases := catalogue.Lease(250*time.Millisecond).DiskMatrix(nil, k)
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
	if _, ok := catalogue.Lease(250*time.Millisecond).DiskCase(faults.Catalogue[0], faults.Crash); ok {
		t.Error("catalogue.DiskCase made a case of a crash")
	}
	f := New(Run{Backend: worker.Backend{Embedded: true}})
	sel := catalogue.Selection{Kinds: []faults.Kind{faults.Crash, faults.SlowSync, faults.FsyncError}}
	if err := f.selectDisk(&sel); err != nil || len(sel.Disk) != 2 || sel.Disk[0] != faults.SlowSync || sel.Disk[1] != faults.FsyncError {
		t.Fatalf("embedded: %v, columns %v", err, sel.Disk)
	}
	f.run.Backend.Embedded = false
	if err := f.selectDisk(&sel); err == nil || !strings.Contains(err.Error(), "--kind slow-sync: disk errors: not tested (") {
		t.Fatalf("a server backend took the disk error columns: %v", err)
	}
}
