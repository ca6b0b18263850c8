package catalogue

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults"
)

// PowerLossCase builds the case of a power loss at window p: the window's
// crash case with the power loss armed in place of the kill; ok is false
// where a crash does not apply.
func (b Builder) PowerLossCase(p faults.Point) (Case, bool) {
	return b.PowerCase(p, faults.PowerLoss)
}

// PowerCase builds the case of a power loss of kind k (faults.PowerLoss
// or faults.TornWrite) at window p.
func (b Builder) PowerCase(p faults.Point, k faults.Kind) (Case, bool) {
	spec, found := faults.Lookup(p)
	if !found || !k.IsPowerLoss() {
		return Case{}, false
	}
	return b.powerLossCase(spec, k, 0)
}

// powerLossCase is the case of a power loss of kind k at spec's window;
// tear is a torn write's unit (faults.Action.Tear: 0 or faults.TearPage
// for pages).
func (b Builder) powerLossCase(spec faults.Spec, k faults.Kind, tear int) (Case, bool) {
	c, ok := b.windowCase(spec, faults.Crash)
	if !ok {
		return Case{}, false
	}
	c.ID = caseID(strings.ReplaceAll(string(spec.Point), "/", "-"), string(k))
	c.Kind = k
	c.Description = fmt.Sprintf("power loss at %q (%s): every process of the case dies and every write not yet synced is lost; recovery must: %s", spec.Step, spec.Window, spec.Recovery)
	tear = faults.ActionTear(tear)
	if k == faults.TornWrite {
		if tear != 0 {
			c.ID += "-" + strconv.Itoa(tear)
		}
		c.Description = fmt.Sprintf("torn power loss at %q (%s): every process of the case dies; of the writes not yet synced some %s survive and the rest are lost; recovery must: %s", spec.Step, spec.Window, faults.TearName(tear), spec.Recovery)
	}
	for i := range c.Steps {
		if a, armed := c.Steps[i].Arms[spec.Point]; armed && c.Steps[i].Worker == "fault" && a.Kind == faults.Crash {
			act := faults.On(k, a.Hit)
			if k == faults.TornWrite {
				act.Tear = tear
			}
			c.Steps[i].Arms[spec.Point] = act
		}
	}
	return c, true
}

// PowerLossMatrix returns a power loss at every window of the catalogue
// and every store-declared window where a crash applies: the power-loss
// column.
func (b Builder) PowerLossMatrix(ws []StoreWindow) []Case {
	return b.powerMatrix(ws, faults.PowerLoss, 0)
}

// TornWriteMatrix is the torn-write column: a torn power loss wherever
// PowerLossMatrix has a power loss, tearing at tear (faults.TearPage or
// 0: 4 KiB pages; faults.TearSector: 512-byte sectors, and the cases' IDs
// end in -512; a smaller power of two down to faults.TearByte tears
// inside one sector, and the IDs end in -N). It runs by default beside
// the power-loss column on an embedded backend, at 512-byte sectors
// (sim/catalogue/torndefault.go), and when asked for (--kind torn-write): at a
// window where the store has nothing un-synced there is nothing to tear,
// and such a case is not applicable off servers, not exercised on one.
func (b Builder) TornWriteMatrix(ws []StoreWindow, tear int) []Case {
	return b.powerMatrix(ws, faults.TornWrite, tear)
}

func (b Builder) powerMatrix(ws []StoreWindow, k faults.Kind, tear int) []Case {
	var out []Case
	for _, s := range faults.Catalogue {
		if c, ok := b.powerLossCase(s, k, tear); ok {
			out = append(out, c)
		}
	}
	for _, w := range ws {
		if c, ok := b.powerLossCase(w.Spec(), k, tear); ok {
			c.Store = true
			out = append(out, c)
		}
	}
	return out
}

// TearSeed is the seed of the n-th (from 0) torn power loss of a case, hit
// at point p: a function of the window and the count alone, so that a
// case, or a scenario made of it, tears the same way when it runs again.
func TearSeed(p faults.Point, n int) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%d", p, n)
	return int64(h.Sum64() >> 1)
}
