package properties

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/crashrun"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// minCatches is how many cases of the whole matrix must catch a mutant
// the matrix catches at all, so that a timing change in one case cannot
// lose it.
const minCatches = 2

// How many cases of the whole in-process matrix (catalogue windows, case
// classes, lease boundaries, between-calls sweep) catch each mutant of the
// catalogue by its invariant: printed as a table, and at least minCatches
// for every mutant but those only the explorer reaches.
func TestMutantCatchesRestOnMoreThanOneCase(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole in-process matrix once per mutant (about half a minute)")
	}
	type row struct {
		name, inv string
		cases     []string
		explored  bool
	}
	var rows []row
	// One mutant, one case at a time: the in-process cases contend for
	// something process-wide, and run slower side by side (measured: 33s
	// in sequence, 68s six mutants at once).
	for _, m := range crashrun.Mutants() {
		r, err := sim.NewRunner(sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), InProcess: true,
			Bugs: m.Options.Bugs, Mutant: m.Options.Mutant, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		probe, _ := r.Probe(ctx) // a mutant may fail the probe: its windows are still counted
		lease := catalogue.Lease(r.Config().LeaseTTL)
		rep := r.RunAll(ctx, catalogue.Selection{}.Cases(probe.Probe, lease, 1), 1, nil)
		r.CloseShared()
		rw := row{name: m.Name, inv: m.Invariant, explored: m.Explore != nil}
		for _, res := range rep.Results {
			if slices.Contains(res.Broken(), m.Invariant) {
				rw.cases = append(rw.cases, res.Case.ID)
			}
		}
		rows = append(rows, rw)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-36s %-4s %6s  %s\n", "mutant", "inv", "cases", "catching cases")
	for _, rw := range rows {
		list := strings.Join(rw.cases, " ")
		if len(list) > 120 {
			list = list[:117] + "..."
		}
		if rw.explored {
			list += " (explore catches it: crashrun.Mutants)"
		}
		fmt.Fprintf(&b, "%-36s %-4s %6d  %s\n", rw.name, rw.inv, len(rw.cases), list)
	}
	t.Log(b.String())
	for _, rw := range rows {
		if !rw.explored && len(rw.cases) < minCatches {
			t.Errorf("mutant %s is caught by %s in %d case(s) of the matrix %v, want at least %d", rw.name, rw.inv, len(rw.cases), rw.cases, minCatches)
		}
	}
}
