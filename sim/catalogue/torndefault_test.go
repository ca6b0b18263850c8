package catalogue

import (
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
)

// The torn-write column comes with power loss on an embedded backend when
// no kind narrows the run, and with its kind anywhere; by default it
// tears at 512-byte sectors.
func TestTornWriteColumnIsInTheDefaultEmbeddedMatrix(t *testing.T) {
	for _, c := range []struct {
		kinds    []faults.Kind
		embedded bool
		want     bool
	}{
		{nil, true, true},
		{nil, false, false},
		{[]faults.Kind{faults.Crash}, true, false},
		{[]faults.Kind{faults.PowerLoss}, true, false},
		{[]faults.Kind{faults.TornWrite}, false, true},
	} {
		if got := TornByDefault(c.kinds, c.embedded); got != c.want {
			t.Errorf("kinds %v, embedded %v: torn-write column %v, want %v", c.kinds, c.embedded, got, c.want)
		}
	}
	torn := 0
	for _, cs := range (Selection{PowerLoss: true, TornWrite: true}).Cases(Probe{}, Lease(250*time.Millisecond), 1) {
		if cs.Kind != faults.TornWrite {
			continue
		}
		torn++
		if !strings.HasSuffix(cs.ID, "-512") {
			t.Errorf("default torn-write case %s: want it torn at 512-byte sectors (an ID ending in -512)", cs.ID)
		}
		for _, st := range cs.Steps {
			if a, ok := st.Arms[cs.Point]; ok && a.Kind == faults.TornWrite && a.TearUnit() != faults.TearSector {
				t.Errorf("%s arms %v, want a tear at %d bytes", cs.ID, a, faults.TearSector)
			}
		}
	}
	if torn != len(Lease(250*time.Millisecond).PowerLossMatrix(nil)) {
		t.Errorf("%d torn-write cases, want one per power-loss case (%d)", torn, len(Lease(250*time.Millisecond).PowerLossMatrix(nil)))
	}
}
