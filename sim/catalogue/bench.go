package catalogue

import (
	"fmt"

	"github.com/crashmatrix/crashmatrix/faults"
)

// CycleCases returns n kill-restart-recover cycles: a worker ingests one
// document and is killed (SIGKILL) after its graph write, before the stage
// advances; a new worker recovers it; then the invariants are checked.
func CycleCases(n int) []Case {
	out := make([]Case, n)
	for i := range out {
		out[i] = Case{ID: fmt.Sprintf("cycle-%05d", i), System: faults.Ingestion, Class: "kill-restart-recover",
			Description: "kill after the graph write, restart, recover",
			Steps: []Step{
				{Worker: "fault", Actions: []Action{{Do: "ingest", Doc: "d4", Content: DocD4}}, Arms: faults.Arms{faults.BeforeGraphApplied: faults.On(faults.Crash, 1)}, ExpectHit: []faults.Point{faults.BeforeGraphApplied}},
				{Worker: "recover", Actions: []Action{{Do: "recover", Rounds: 5}}, ContinueOnError: true},
			}}
	}
	return out
}
