package main

import (
	"fmt"
	"slices"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim"
)

// powerLossSelection adds the power-loss column to a certification where
// the runner can cut the power. Elsewhere it returns the line reports
// print ("power loss: not tested (why)"), or an error when power loss was
// asked for by --kind.
func powerLossSelection(r *sim.Runner, sel *sim.Selection) (string, error) {
	why := r.PowerLossUntested()
	if why == "" {
		sel.PowerLoss = true
		return "", nil
	}
	if slices.Contains(sel.Kinds, faults.PowerLoss) {
		return "", fmt.Errorf("--kind %s: %s", faults.PowerLoss, sim.PowerLossNotTested(why))
	}
	return sim.PowerLossNotTested(why), nil
}
