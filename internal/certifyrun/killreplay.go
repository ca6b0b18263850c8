package certifyrun

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// writeKillReplays writes each random kill and durable-step kill that
// broke an invariant as a scenario (the same crash at the same store call or commit, or for a
// wall-clock kill the same offset, expecting the same invariants to break,
// with the run's bugs and mutant) and prints the command that replays it.
// On a run through the service protocol (service, the --service-cmd
// command, not "") the scenario names the service and carries the run's
// bugs as the service's, its own broken variants included, so that run
// replays it through the same service.
func writeKillReplays(out io.Writer, workdir, backend, service string, leaseTTL time.Duration, rep verdict.Report, runArgs ...string) error {
	for _, r := range rep.Results {
		if r.Case.Class != catalogue.RandomKillClass && !catalogue.IsDurableStep(r.Case) || r.Verdict != verdict.Fail {
			continue
		}
		sc, err := scenarios.FromFailure(r, rep, backend, leaseTTL)
		if err != nil {
			return err
		}
		if service != "" {
			sc.OnService(service)
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

// serviceCommand is the command of a run's service ("" without one).
func serviceCommand(s *sim.ServiceSpec) string {
	if s == nil {
		return ""
	}
	return s.Command
}
