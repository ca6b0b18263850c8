package sim

import "github.com/crashmatrix/crashmatrix/faults"

// Torn writes in the default matrix: wherever the power-loss column runs
// on an embedded backend (the case's data in its folder on the lazy
// mount: the embedded SQLite, a --store-cmd store, a Go store marked
// Embedded), the torn-write column runs beside it by default, tearing at
// 512-byte disk sectors (faults.TearSector), so that a store that trusts a
// page it rewrote in place without a checksum is caught without asking
// for it. On a server backend it stays opt-in (--kind torn-write).

// defaultTear is the torn-write column's unit when the selection names
// none (Selection.Tear 0): disk sectors.
const defaultTear = faults.TearSector

// tornByDefault says whether a selection with power loss on gets the
// torn-write column: asked for by its kind, or by no kind at all on an
// embedded backend.
func tornByDefault(kinds []faults.Kind, embedded bool) bool {
	for _, k := range kinds {
		if k == faults.TornWrite {
			return true
		}
	}
	return len(kinds) == 0 && embedded
}

// TornNotApplicable is the note of a torn power loss that found nothing
// written and not synced to tear (CauseNothingToTear) off a server: at
// its window the store had synced everything, so the cut was the
// power-loss column's plain one at the same window, which judges it.
const TornNotApplicable = "a torn power loss with nothing to tear: at this window the store had synced everything it wrote, so the cut lost or kept whole files only, as the power-loss case at the same window does (which judges it); a torn write needs a write not yet synced, as a store that rewrites a page in place before its sync has"

// tornWithoutTear reports whether a case not exercised is a torn power
// loss that had nothing to tear, on a backend where that is settled (not a
// server's: there the next run may find something to tear).
func tornWithoutTear(miss *NotExercisedReason, server bool) bool {
	return miss != nil && miss.Cause == CauseNothingToTear && miss.Cause.settled(server)
}
