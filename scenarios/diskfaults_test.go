package scenarios

import (
	"slices"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/faults/lazyfs"
	"github.com/crashmatrix/crashmatrix/sim"
)

// A scenario file names the disk error kinds like any other: the matrix's
// case of each, written as a scenario and read back, arms the same
// action, and replayed with real processes on the default stores it
// passes with the error acting as the case's note says (the same on a
// second replay). In-process there is no disk to fail: undecided, never
// a pass.
func TestDiskErrorScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real worker processes")
	}
	if err := lazyfs.Available(); err != nil {
		t.Fatal(sim.PowerLossNotTested(err.Error()))
	}
	spec, _ := faults.Lookup(faults.BeforePrepare)
	acted := map[faults.Kind]string{faults.FsyncError: "1 fsync failed with EIO", faults.DiskFull: "failed with ENOSPC", faults.SlowSync: "1 fsync took longer than the lease"}
	for _, k := range faults.DiskKinds {
		c, ok := sim.DiskCase(spec, k, 250)
		if !ok {
			t.Fatalf("no %s case at %s", k, spec.Point)
		}
		s, err := FromCase(c)
		if err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		s.Expect.Verdict = ExpectPass
		b, err := s.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "kind: "+string(k)) {
			t.Fatalf("the scenario of %s does not name its kind:\n%s", c.ID, b)
		}
		back, err := Parse(c.ID+".yaml", b)
		if err != nil {
			t.Fatalf("%s read back: %v\n%s", c.ID, err, b)
		}
		if got := back.Case().Steps[0].Arms[faults.BeforePrepare]; got != c.Steps[0].Arms[faults.BeforePrepare] {
			t.Fatalf("%s: the scenario arms %v, the case %v", c.ID, got, c.Steps[0].Arms[faults.BeforePrepare])
		}
		for i := 0; i < 2; i++ {
			res := replay(t, back, false)
			if err := back.JudgeResult(res); err != nil || !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, acted[k]) }) {
				t.Fatalf("%s replay %d: %v, notes %v; want a pass in which %q", c.ID, i+1, err, res.Notes, acted[k])
			}
		}
		if res := replay(t, back, true); res.Verdict != sim.Undecided {
			t.Errorf("%s in-process: %s %v", c.ID, res.Verdict, res.Notes)
		}
	}
}
