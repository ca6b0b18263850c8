package certifyrun

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// writeKillReplays writes each random kill and durable-step kill that
// broke an invariant as a scenario (the same crash at the same store call or commit, or for a
// wall-clock kill the same offset, expecting the same invariants to break,
// with the run's bugs and mutant) and prints the command that replays it.
// Under a service's broken variant of its own (a --bug that is no defect
// of the reference) it writes none and says so: a scenario carries the
// reference's defects only.
func writeKillReplays(out io.Writer, workdir, backend string, leaseTTL time.Duration, rep verdict.Report, runArgs ...string) error {
	own := ownBug(rep.Bugs)
	for _, r := range rep.Results {
		if r.Case.Class != catalogue.RandomKillClass && !catalogue.IsDurableStep(r.Case) || r.Verdict != verdict.Fail {
			continue
		}
		if own != "" {
			fmt.Fprintf(out, "%s broke %s: no scenario written: the service's --bug %s is not one of the reference's defects, which scenarios carry (rerun the case as the report says)\n", r.Case.ID, strings.Join(r.Broken(), ","), own)
			continue
		}
		sc, err := scenarios.FromFailure(r, rep, backend, leaseTTL)
		if err != nil {
			return err
		}
		b, err := sc.Marshal()
		if err != nil {
			return err
		}
		path := filepath.Join(workdir, sc.Name+".yaml")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
		how := "replay with"
		if _, _, _, ok := catalogue.AnchoredKill(r.Case); !ok && !catalogue.IsDurableStep(r.Case) {
			how = "a wall-clock kill, it lands where the machine's timing puts it; try"
		}
		fmt.Fprintf(out, "%s broke %s: %s: crashmatrix run %s --repeat 10%s\n", r.Case.ID, strings.Join(r.Broken(), ","), how, path, strings.TrimRight(" "+strings.Join(runArgs, " "), " "))
	}
	return nil
}

// ownBug is a bug of the run that is no defect of the reference (a
// service's broken variant, --service-cmd's --bug), "" when there is none.
func ownBug(bugs []string) string {
	for _, b := range bugs {
		if !slices.Contains(reference.Bugs, reference.Bug(b)) {
			return b
		}
	}
	return ""
}
