// Package certifyrun is crashmatrix certify below its flags: the
// conformance suites of a store run by a command (RunConformance), then the
// crash matrix (a fault-free probe run, the cases the run's selection
// builds from what it found, every case run and judged), the exploration
// after a matrix that certified, and the reports. The CLI parses certify's
// flags into Options and calls Run, which returns the exit code.
package certifyrun

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/crashmatrix/crashmatrix/internal/cmdkit"
	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/servers/serverfaults"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// Options are one certify run, as its flags asked for it.
type Options struct {
	// Config is the runner's configuration the flags fixed: the backend
	// and its launcher, bugs, mutant, seed, execution mode, clock,
	// fail-fast, server faults, recovery and service. Run fills in the
	// work folder and the timing.
	Config sim.Config
	// Backend names the backend in the reports and replay scenarios;
	// Label names it on the progress bar (--backend as given).
	Backend, Label string
	// Servers faults the database servers (nil: no server is faulted).
	Servers *serverfaults.Supervisor
	// Selection is the part of the matrix to run (all of it when empty).
	Selection catalogue.Selection
	// TearGiven says --tear was given: a run without the torn-write
	// column it applies to is refused.
	TearGiven bool
	// Shard, if set, runs only its share of the matrix.
	Shard *catalogue.Shard
	// LeaseTTL is the workers' lease TTL; 0 adapts it to what the
	// calibration and the cases measure, from the backend's default.
	LeaseTTL time.Duration
	// WorkDir holds the case data ("": a temporary folder, removed when
	// the run certified unless Keep).
	WorkDir     string
	Keep, Quiet bool
	Details     bool
	Parallel    int
	JSON, JUnit string
	HTML        string
	Matrix      catalogue.MatrixID // the matrix's identity, without its cases (Run adds them)
	Replay      Replay
	Conformance Conformance
	Explore     Explore
	Stderr      io.Writer // setup notes and errors
}

// Replay are the commands that run this certify, or a part of it, again.
type Replay struct {
	// Rerun runs the same certify again; Base is what merge prefixes to
	// a case's window and kind to replay it.
	Rerun, Base string
	// Case replays one case of the run.
	Case func(verdict.CaseResult) string
	// Args are the store and service flags a scenario replay
	// (crashmatrix run) of a failing kill needs.
	Args []string
	// Backend is the backend a written scenario names ("": the run's;
	// "containers" where the run started its servers).
	Backend string
}

// Run runs certify: the conformance suites when asked, the crash matrix,
// the exploration and the reports, written to out. It returns the exit
// code: 0 certified, 1 an invariant broke, 2 undecided or a setup the run
// cannot vouch for (said on o.Stderr). An error ends the run before a
// verdict (the caller exits 2).
func Run(ctx context.Context, o Options, out io.Writer) (int, error) {
	if code, done, err := RunConformance(ctx, o.Conformance, o.Details, out); done || err != nil {
		return code, err
	}
	r := &run{o: o, ctx: ctx, out: out, ropt: report.Options{Replay: o.Replay.Case, Rerun: o.Replay.Rerun, Details: o.Details, Command: "certify"}}
	// Without --lease-ttl the timings adapt: the default is a floor,
	// raised to what a calibration before the matrix and the cases
	// themselves measure on this machine now.
	adaptive := o.LeaseTTL <= 0
	r.o.LeaseTTL = cmdkit.DefaultLeaseTTL(o.LeaseTTL, o.Backend)
	if r.workdir = o.WorkDir; r.workdir == "" {
		var err error
		if r.workdir, err = os.MkdirTemp(sim.CaseRoot(), "crashmatrix-"); err != nil {
			return 0, err
		}
		r.tmp = true
		// Every way out but the one that names the folder removes it:
		// an error leaves no empty folder behind.
		defer func() {
			if !r.kept {
				_ = os.RemoveAll(r.workdir)
			}
		}()
	}
	cfg := o.Config
	cfg.WorkDir, cfg.LeaseTTL, cfg.Adaptive = r.workdir, r.o.LeaseTTL, adaptive
	runner, err := sim.NewRunner(cfg)
	if err != nil {
		return r.setupFailed(err)
	}
	cases, code, err := r.cases(runner)
	if cases == nil {
		return code, err
	}
	r.runMatrix(runner, cases)
	if err := r.explore(); err != nil {
		return 0, err
	}
	return r.finish()
}

// run is one certify run under way.
type run struct {
	o       Options
	ctx     context.Context
	out     io.Writer
	ropt    report.Options
	workdir string
	tmp     bool
	// kept: the case data stays (a failed run, --workdir, --keep).
	kept bool
	rep  verdict.Report
	// What the probe run found, and the selection it completed.
	probe    verdict.Probe
	perr     error
	sel      catalogue.Selection
	untested string
	leftOut  []string
	matrixID *catalogue.MatrixID
}

// setupFailed reports a setup the run cannot vouch for: exit 2.
func (r *run) setupFailed(err error) (int, error) {
	fmt.Fprintln(r.o.Stderr, "crashmatrix:", err)
	return 2, nil
}
