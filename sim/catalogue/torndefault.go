package catalogue

import "github.com/crashmatrix/crashmatrix/faults"

// Torn writes in the default matrix: wherever the power-loss column runs
// on an embedded backend (the case's data in its folder on the lazy
// mount: the embedded SQLite, a --store-cmd store, a Go store marked
// Embedded), the torn-write column runs beside it by default, tearing at
// 512-byte disk sectors (faults.TearSector), so that a store that trusts a
// page it rewrote in place without a checksum is caught without asking
// for it. On a server backend it stays opt-in (--kind torn-write). A torn
// case that found nothing to tear is judged in sim/verdict
// (verdict.TornWithoutTear).

// defaultTear is the torn-write column's unit when the selection names
// none (Selection.Tear 0): disk sectors.
const defaultTear = faults.TearSector

// TornByDefault says whether a selection with power loss on gets the
// torn-write column: asked for by its kind, or by no kind at all on an
// embedded backend.
func TornByDefault(kinds []faults.Kind, embedded bool) bool {
	for _, k := range kinds {
		if k == faults.TornWrite {
			return true
		}
	}
	return len(kinds) == 0 && embedded
}
