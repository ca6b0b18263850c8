package verdict

// TornNotApplicable is the note of a torn power loss that found nothing
// written and not synced to tear (CauseNothingToTear) off a server: at
// its window the store had synced everything, so the cut was the
// power-loss column's plain one at the same window, which judges it (the
// torn-write column in the default embedded matrix:
// sim/catalogue/torndefault.go).
const TornNotApplicable = "a torn power loss with nothing to tear: at this window the store had synced everything it wrote, so the cut lost or kept whole files only, as the power-loss case at the same window does (which judges it); a torn write needs a write not yet synced, as a store that rewrites a page in place before its sync has"

// TornWithoutTear reports whether a case not exercised is a torn power
// loss that had nothing to tear, on a backend where that is settled (not a
// server's: there the next run may find something to tear).
func TornWithoutTear(miss *NotExercisedReason, server bool) bool {
	return miss != nil && miss.Cause == CauseNothingToTear && miss.Cause.Settled(server)
}
