package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/internal/explorerun"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/spf13/cobra"
)

// exploreCount is how many schedules certify explores after the matrix:
// --explore when given, else the default on the whole matrix (a store or
// a service run as processes, --store-cmd or --service-cmd, its own:
// explorerun.DefaultProcessCount) and none on a part of it (--point,
// --kind, --class: a run that replays cases).
func exploreCount(cmd *cobra.Command, f certifyFlags) int {
	switch {
	case cmd.Flags().Changed("explore"):
		return f.explore
	case len(f.points)+len(f.kinds)+len(f.only) > 0:
		return 0
	case f.store.command != "" || f.service.command != "":
		return explorerun.DefaultProcessCount
	}
	return f.explore
}

// certifyExplore runs certify's exploration after the matrix (in-process
// where the backend allows: a --store-cmd store or a --service-cmd
// service runs as a child of each worker process, and schedules the
// service cannot run are left out) and puts what it did into rep: its line, and a finding
// as a failing case, its shrunk scenario written into workdir. It does
// not run when the matrix did not certify (the verdict is given), on
// --fail-fast's first failure or an interrupted run.
func certifyExplore(cmd *cobra.Command, f certifyFlags, spec sim.BackendSpec, self string, bugs []reference.Bug,
	workdir string, probe catalogue.Probe, shard *catalogue.Shard, rep *verdict.Report, ropt *report.Options) error {
	count := exploreCount(cmd, f)
	switch {
	case count == 0 && len(f.points)+len(f.kinds)+len(f.only) > 0 && !cmd.Flags().Changed("explore"):
		return nil // a part of the matrix: its report says which, and explores nothing
	case count == 0:
		rep.Exploration = explorerun.Off
		return nil
	case cmd.Context().Err() != nil:
		return nil
	case rep.ExitCode != 0:
		rep.Exploration = "exploration: not run (the matrix did not certify)"
		return nil
	}
	seed := f.exploreSeed
	if !cmd.Flags().Changed("explore-seed") {
		seed = f.seed
	}
	// The seed decides the runs' retry jitter too, as explore's --seed
	// does: the same schedules as crashmatrix explore --seed, and the
	// scenario (which records it) replays under it.
	service, err := f.service.spec(f.inProcess)
	if err != nil {
		return err
	}
	cfg := sim.Config{Backend: spec, Launcher: sim.BinaryLauncher{Path: self}, WorkDir: filepath.Join(workdir, "explore"),
		InProcess: f.store.command == "" && service == nil, InProcessFiles: f.inProcessFiles, Seed: seed, Bugs: bugs, Mutant: f.mutant,
		WallClock: f.wallClock, Service: service}
	f.store.useRecovery(&cfg)
	mode := "in-process"
	if !cfg.InProcess {
		mode = "process kills"
	}
	if cmd.Flags().Changed("lease-ttl") {
		cfg.LeaseTTL = f.leaseTTL
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil { // the service's declarations are learnt in it
		return fmt.Errorf("exploration: %w", err)
	}
	runner, err := sim.NewRunner(cfg)
	if err != nil {
		return fmt.Errorf("exploration: %w", err)
	}
	defer runner.CloseShared()
	shape := explorerun.Shape(probe)
	shape.LeaseTTLMillis = runner.Config().LeaseTTL.Milliseconds()
	o := explorerun.Options{Count: count, Seed: seed, Parallel: 4 * runtime.NumCPU(), Shape: shape, Dir: workdir,
		Settings: explorerun.Settings{Bugs: bugs, Mutant: f.mutant, Mode: mode, By: fmt.Sprintf("crashmatrix certify --explore %d --explore-seed %d", count, seed)},
		Replay: func(path string) string {
			args := []string{selfCommand(), "run", shellQuote(path), "--repeat", "10"}
			args = append(args, f.service.replayArgs()...)
			if sa := f.store.replayArgs(); sa != nil {
				args = append(args, sa...)
			} else if spec.Name != "sqlite" {
				args = append(args, "--backend", shellQuote(f.backend))
			}
			if cfg.InProcess {
				args = append(args, "--in-process")
			}
			return strings.Join(args, " ")
		}}
	if shard != nil {
		o.ShardIndex, o.ShardCount = shard.Index, shard.Count
	}
	defer tuneGC(cfg.InProcess)()
	start := time.Now()
	share := ""
	if shard != nil {
		share = fmt.Sprintf("shard %s's share of ", shard)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "exploring %s%d schedules of seed %d (%s) after the matrix…\n", share, count, seed, mode)
	out, err := explorerun.Run(cmd.Context(), runner, o)
	if err != nil {
		return fmt.Errorf("exploration: %w", err)
	}
	out.Line += fmt.Sprintf(" in %s", time.Since(start).Round(time.Millisecond))
	out.AddTo(rep)
	if out.Case != nil {
		fmt.Fprintln(cmd.OutOrStdout(), out.Line)
	}
	if out.ReplayCmd != "" {
		matrix := ropt.Replay
		ropt.Replay = func(r verdict.CaseResult) string {
			if r.Case.Class == explorerun.Class {
				return out.ReplayCmd
			}
			return matrix(r)
		}
	}
	return nil
}
