package properties

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/crashrun"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// The in-flight mutants (a stale holder renewing another holder's live
// lease, a recovery scan blind to a dead letter under way, edge support
// blind to plans in flight) were reached by exploration alone: the matrix
// without the in-flight classes (sim.InFlightClasses and their second
// cases) certifies each of them, and each of its class's two cases
// catches it by its invariant.
func TestInFlightMutantsNeedTheirClasses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole in-process matrix once per mutant")
	}
	inFlight := func(c catalogue.Case) bool {
		return slices.ContainsFunc(catalogue.InFlightClasses, func(class string) bool {
			return c.Class == class || strings.HasPrefix(c.Class, class+"-")
		})
	}
	n := 0
	for _, m := range crashrun.Mutants() {
		if len(m.Options.Classes) != 1 || !slices.Contains(catalogue.InFlightClasses, m.Options.Classes[0]) {
			continue
		}
		n++
		class := m.Options.Classes[0]
		t.Run(m.Name, func(t *testing.T) {
			r, probe := probedInProcess(t, sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, Bugs: m.Options.Bugs, Mutant: m.Options.Mutant})
			ctx := context.Background()
			lease := catalogue.Lease(r.Config().LeaseTTL)
			all := catalogue.Selection{}.Cases(probe.Probe, lease, 1)
			before := slices.DeleteFunc(slices.Clone(all), inFlight)
			if len(before) == len(all) {
				t.Fatal("the matrix holds no in-flight case")
			}
			if rep := r.RunAll(ctx, before, 2, nil); rep.ExitCode != 0 {
				t.Fatalf("the matrix without the in-flight classes (%d cases) gave exit %d, broke %v: it reaches %s without them", len(before), rep.ExitCode, rep.Broken(), m.Name)
			}
			own := slices.DeleteFunc(slices.Clone(all), func(c catalogue.Case) bool { return c.Class != class && !strings.HasPrefix(c.Class, class+"-") })
			rep := r.RunAll(ctx, own, 2, nil)
			for _, res := range rep.Results {
				if !slices.Contains(res.Broken(), m.Invariant) {
					t.Errorf("case %s: %s, broke %v; want %s", res.Case.ID, res.Verdict, res.Broken(), m.Invariant)
				}
			}
			if len(own) < 2 {
				t.Errorf("class %s has %d case(s) in the matrix, want two (the class and its second case)", class, len(own))
			}
		})
	}
	if n != len(catalogue.InFlightClasses) {
		t.Fatalf("%d in-flight mutants in the catalogue, want one per class %v", n, catalogue.InFlightClasses)
	}
}
