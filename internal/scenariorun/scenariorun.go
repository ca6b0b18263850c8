// Package scenariorun is crashmatrix run below its flags: it replays
// scenario files, each as often as asked, judges each against its expect
// block (and, replayed more than once, against its own first run: the
// same verdict and the same history), prints a line per scenario, and
// writes the reports. The CLI loads the files, parses the flags into
// Options and calls Run, which returns the exit code.
package scenariorun

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/internal/cmdkit"
	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// Options are one run of scenario files.
type Options struct {
	// Scenarios are the scenarios to replay, in order; Paths names each
	// one's file, for its replay command.
	Scenarios []*scenarios.Scenario
	Paths     map[*scenarios.Scenario]string
	// Config is the runner's configuration the flags fixed (backend,
	// launcher, mode, server faults, recovery); each scenario applies its
	// own bugs, mutant, seed and lease to it.
	Config sim.Config
	// Backend names the backend in the report; Want is the backend a
	// scenario that names one must name to run (the others are skipped).
	Backend, Want string
	// Repeat replays each scenario this many times (at least once).
	Repeat int
	// WorkDir holds the histories ("": a temporary folder, removed when
	// every scenario met its expectation unless Keep or Details).
	WorkDir       string
	Keep, Details bool
	JSON, JUnit   string
	HTML          string
	// Replay is the command that replays one scenario file as this run
	// did; Rerun runs the whole run again.
	Replay func(path string) string
	Rerun  string
	Stderr io.Writer // setup errors
}

// Run replays the scenarios and writes the lines and reports to out. It
// returns the exit code: 0 every scenario met its expectation, 1 one did
// not, 2 a run was undecided or a setup the run cannot vouch for (said on
// o.Stderr). An error ends the run before a verdict (the caller exits 2).
func Run(ctx context.Context, o Options, out io.Writer) (int, error) {
	// Histories are kept when a scenario did not meet its expectation,
	// or when asked (--keep, --workdir, -v, which prints their paths);
	// any other way out removes a temporary folder, errors included.
	r := &run{o: o, ctx: ctx, out: out, kept: o.Keep || o.Details || o.WorkDir != "", replays: map[string]string{},
		rep: verdict.Report{Backend: o.Backend, Started: time.Now(), Seed: -1}}
	if r.workdir = o.WorkDir; r.workdir == "" {
		var err error
		if r.workdir, err = os.MkdirTemp(sim.CaseRoot(), "crashmatrix-run-"); err != nil {
			return 0, err
		}
		defer func() {
			if !r.kept {
				_ = os.RemoveAll(r.workdir)
			}
		}()
	}
	// A line at each tenth of the scenarios and every 10 s outside a
	// terminal; on one, the line of each scenario says as much.
	progress := func(failed bool) {}
	plog := cmdkit.ProgressLog(out, "run", "scenarios", len(o.Scenarios), 0)
	if plog != nil {
		defer plog.Stop() // a return inside the loop
		progress = plog.Done
	}
	for _, s := range o.Scenarios {
		failed, code, err := r.scenario(s)
		if code != 0 || err != nil {
			return code, err
		}
		progress(failed)
	}
	if plog != nil {
		plog.Stop()
	}
	return r.finish()
}

// run is one run of scenario files under way.
type run struct {
	o       Options
	ctx     context.Context
	out     io.Writer
	workdir string
	kept    bool
	code    int
	all     []verdict.CaseResult
	replays map[string]string // case ID -> its replay command
	rep     verdict.Report
}

// finish writes the reports, says where the histories are, and returns
// the run's exit code.
func (r *run) finish() (int, error) {
	r.kept = r.kept || r.code != 0
	r.rep.Results, r.rep.Took = r.all, time.Since(r.rep.Started)
	if r.rep.Seed < 0 {
		r.rep.Seed = 0
	}
	r.rep.Finish()
	ropt := report.Options{Command: "run", Details: r.o.Details, Replay: func(c verdict.CaseResult) string { return r.replays[c.Case.ID] },
		Rerun: r.o.Rerun}
	if err := cmdkit.WriteReports(r.out, r.rep, ropt, r.o.JSON, r.o.JUnit, r.o.HTML); err != nil {
		return 0, err
	}
	if r.kept {
		fmt.Fprintf(r.out, "histories: %s\n", r.workdir)
	}
	return r.code, nil
}

// runner makes the runner of scenario s and notes its settings in the
// report: its seed, mutant and bugs.
func (r *run) runner(s *scenarios.Scenario) (*sim.Runner, sim.Config, error) {
	base := r.o.Config
	base.WorkDir, base.Seed = filepath.Join(r.workdir, s.Name), 1
	cfg := s.Apply(base)
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil { // a service's declarations are learnt in it
		return nil, cfg, err
	}
	runner, err := sim.NewRunner(cfg)
	if err != nil {
		return nil, cfg, err
	}
	rep := &r.rep
	rep.Upgrade = runner.UpgradeLine()
	if rep.Seed == -1 {
		rep.Seed = runner.Config().Seed
	} else if rep.Seed != runner.Config().Seed {
		rep.Seed = 0 // scenarios with different seeds: each file names its own
	}
	if cfg.Mutant != "" && !slices.Contains(strings.Split(rep.Mutant, ","), cfg.Mutant) {
		rep.Mutant = strings.Trim(rep.Mutant+","+cfg.Mutant, ",")
	}
	for _, b := range cfg.Bugs {
		if !slices.Contains(rep.Bugs, string(b)) {
			rep.Bugs = append(rep.Bugs, string(b))
		}
	}
	return runner, cfg, nil
}
