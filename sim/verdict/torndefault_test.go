package verdict

import "testing"

// A torn power loss that had nothing to tear is not applicable off
// servers (the power-loss case judges the same cut) and stays not
// exercised on a server, where the next run may find something to tear.
func TestNothingToTearIsNotApplicableOffServers(t *testing.T) {
	miss := &NotExercisedReason{Cause: CauseNothingToTear}
	if !TornWithoutTear(miss, false) || TornWithoutTear(miss, true) {
		t.Errorf("nothing to tear: not applicable off servers %v, on servers %v; want true, false", TornWithoutTear(miss, false), TornWithoutTear(miss, true))
	}
	if TornWithoutTear(&NotExercisedReason{Cause: CauseDataElsewhere}, false) || TornWithoutTear(nil, false) {
		t.Error("another cause taken for nothing to tear")
	}
}
