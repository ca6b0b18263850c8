package sim_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/embedded"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// failsCalibration is the embedded default whose stores a calibration
// worker cannot open.
const failsCalibration = "sqlite-fails-calibration"

func init() {
	sim.RegisterBackend(failsCalibration, func(sim.BackendSpec) (sim.Backend, error) {
		b := embedded.SQLite()
		b.Name = failsCalibration
		open := b.Open
		b.Open = func(ctx context.Context, env sim.CaseEnv) (reference.Stores, error) {
			if workerName() == "calibrate" {
				// A worker that cannot even start its service: the
				// calibration case is undecided.
				fmt.Fprintln(os.Stderr, "the calibration worker's stores do not open")
				os.Exit(3)
			}
			return open(ctx, env)
		}
		return b, nil
	})
}

// On the harness clock the calibration runs beside the cases; when it
// fails, the run still reports it alone, once, as undecided.
func TestCalibrationFailureIsReportedAlone(t *testing.T) {
	r := processRunner(t, failsCalibration, nil)
	var cases []catalogue.Case
	for _, p := range []faults.Point{faults.BeforeGraphApplied, faults.BeforeCompleted} {
		c, ok := catalogue.Lease(250*time.Millisecond).WindowCase(p, faults.Crash)
		if !ok {
			t.Fatalf("no crash case at %s", p)
		}
		cases = append(cases, c)
	}
	rep := r.RunAll(context.Background(), cases, 2, nil)
	if len(rep.Results) != 1 || rep.Results[0].Case.Class != "calibration" || rep.Results[0].Verdict != verdict.Undecided || rep.ExitCode != 2 {
		var got []string
		for _, res := range rep.Results {
			got = append(got, fmt.Sprintf("%s: %s %q", res.Case.ID, res.Verdict, res.Notes))
		}
		t.Fatalf("exit %d, results %q: want the calibration alone, undecided", rep.ExitCode, got)
	}
	if notes := strings.Join(rep.Results[0].Notes, "; "); !strings.Contains(notes, "calibration on backend "+failsCalibration) {
		t.Fatalf("notes %q: want the calibration's failure", notes)
	}
}
