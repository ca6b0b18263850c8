package properties

import (
	"slices"

	"github.com/crashmatrix/crashmatrix/reference"
)

// bhOpener returns a fresh, empty bundle.
type bhOpener func(t suiteT) reference.Stores

// runBehaviour runs every behaviour test against bundles from open.
func runBehaviour(t suiteT, open bhOpener) {
	probe := open(t)
	for _, c := range []struct {
		name  string
		needs []bool
		run   func(suiteT, bhOpener)
	}{
		{"Operations", []bool{probe.Ops != nil}, testOperations},
		{"OperationCAS", []bool{probe.Ops != nil}, testOperationCAS},
		{"Recoverable", []bool{probe.Ops != nil}, testRecoverable},
		{"Claims", []bool{probe.Ops != nil}, testClaims},
		{"States", []bool{probe.States != nil}, testStates},
		{"StateHistory", []bool{probe.States != nil}, testStateHistory},
		{"References", []bool{probe.States != nil}, testReferences},
		{"Registry", []bool{probe.Registry != nil}, testRegistry},
		{"Graph", []bool{probe.Writer != nil}, testGraph},
		{"GraphRandom", []bool{probe.Writer != nil}, testGraphRandom},
		{"Locks", []bool{probe.Locks != nil}, testLocks},
		{"PrefixSpaces", []bool{confComplete(probe)}, testPrefixSpaces},
		{"Races", []bool{confComplete(probe)}, testRaces},
	} {
		t.Run(c.name, func(t suiteT) {
			if slices.Contains(c.needs, false) {
				t.Skipf("the bundle lacks a store %s needs", c.name)
			}
			c.run(t, open)
		})
	}
}
