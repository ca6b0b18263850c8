package certifyrun

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/crashmatrix/crashmatrix/internal/explorerun"
	"github.com/crashmatrix/crashmatrix/internal/tune"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// Explore is the exploration certify runs after a matrix that certified.
type Explore struct {
	// Count schedules, drawn from Seed (0: off, and the verdict says so).
	Count int
	Seed  int64
	// Part says the run is a part of the matrix (--point, --kind,
	// --class) and explores by default nothing: its report says which
	// part, and no exploration line.
	Part bool
	// InProcess runs the schedules in-process (false: a store run as
	// processes).
	InProcess bool
	// LeaseTTL: the schedules run with the matrix's lease TTL (--lease-ttl
	// given); otherwise with the exploration's own.
	LeaseTTL bool
	// Replay is the command that replays a finding's scenario file.
	Replay func(path string) string
}

// explore runs the exploration after the matrix (in-process where the
// backend allows: a --store-cmd store or a --service-cmd service runs as
// a child of each worker process) and puts what it did into the report: its line, and a finding
// as a failing case, its shrunk scenario written into the work folder. It
// does not run when the matrix did not certify (the verdict is given), on
// --fail-fast's first failure or an interrupted run.
func (r *run) explore() error {
	e, rep := r.o.Explore, &r.rep
	switch {
	case e.Count == 0 && e.Part:
		return nil
	case e.Count == 0:
		rep.Exploration = explorerun.Off
		return nil
	case r.ctx.Err() != nil:
		return nil
	case rep.ExitCode != 0:
		rep.Exploration = "exploration: not run (the matrix did not certify)"
		return nil
	}
	cfg := r.exploreConfig()
	mode := "in-process"
	if !cfg.InProcess {
		mode = "process kills"
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil { // a service's declarations are learnt in it
		return fmt.Errorf("exploration: %w", err)
	}
	runner, err := sim.NewRunner(cfg)
	if err != nil {
		return fmt.Errorf("exploration: %w", err)
	}
	defer runner.CloseShared()
	shape := explorerun.Shape(r.probe.Probe)
	shape.LeaseTTLMillis = runner.Config().LeaseTTL.Milliseconds()
	o := explorerun.Options{Count: e.Count, Seed: e.Seed, Parallel: 4 * runtime.NumCPU(), Shape: shape, Dir: r.workdir, Replay: e.Replay,
		Settings: explorerun.Settings{Bugs: cfg.Bugs, Mutant: cfg.Mutant, Mode: mode, By: fmt.Sprintf("crashmatrix certify --explore %d --explore-seed %d", e.Count, e.Seed)}}
	share := ""
	if s := r.o.Shard; s != nil {
		o.ShardIndex, o.ShardCount = s.Index, s.Count
		share = fmt.Sprintf("shard %s's share of ", s)
	}
	defer tune.GC(cfg.InProcess)()
	start := time.Now()
	fmt.Fprintf(r.o.Stderr, "exploring %s%d schedules of seed %d (%s) after the matrix…\n", share, e.Count, e.Seed, mode)
	found, err := explorerun.Run(r.ctx, runner, o)
	if err != nil {
		return fmt.Errorf("exploration: %w", err)
	}
	found.Line += fmt.Sprintf(" in %s", time.Since(start).Round(time.Millisecond))
	found.AddTo(rep)
	if found.Case != nil {
		fmt.Fprintln(r.out, found.Line)
	}
	if found.ReplayCmd != "" {
		matrix := r.ropt.Replay
		r.ropt.Replay = func(c verdict.CaseResult) string {
			if c.Case.Class == explorerun.Class {
				return found.ReplayCmd
			}
			return matrix(c)
		}
	}
	return nil
}

// exploreConfig is the exploration's runner configuration: the matrix's
// backend, bugs, mutant and clock, in the exploration's mode, seed and
// folder. The seed decides the runs' retry jitter too, as explore's
// --seed does: the same schedules as crashmatrix explore --seed, and the
// scenario (which records it) replays under it.
func (r *run) exploreConfig() sim.Config {
	base, e := r.o.Config, r.o.Explore
	cfg := sim.Config{Backend: base.Backend, Launcher: base.Launcher, WorkDir: filepath.Join(r.workdir, "explore"),
		InProcess: e.InProcess, InProcessFiles: base.InProcessFiles, Seed: e.Seed, Bugs: base.Bugs, Mutant: base.Mutant, WallClock: base.WallClock,
		RecoverWith: base.RecoverWith, RecoverLabel: base.RecoverLabel, Service: base.Service}
	if e.LeaseTTL {
		cfg.LeaseTTL = r.o.LeaseTTL
	}
	return cfg
}
