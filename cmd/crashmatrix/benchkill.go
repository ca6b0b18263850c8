package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/spf13/cobra"
)

// killReplayBug is the reference mutant the random-kill replay figure
// hunts: only a crash shows it (a resumed operation asks the model again),
// and random kills catch it, about one kill in five.
const killReplayBug = reference.BugRecallModelOnResume

// killReplays is how many times the figure replays the finding.
const killReplays = 10

// benchKillReplay prints how often a random kill's finding replays: random
// kills against killReplayBug until one breaks an invariant, its scenario
// written to a file and read back as certify writes it, then run
// killReplays times as `crashmatrix run --repeat 10` runs it, counting the
// runs that broke the same invariants again.
func benchKillReplay(cmd *cobra.Command, self, backend, benchDir string, ttl time.Duration, parallel, kills int) error {
	out := cmd.OutOrStdout()
	ctx := cmd.Context()
	work, err := os.MkdirTemp(benchDir, "crashmatrix-bench-kills-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	base := sim.Config{Backend: sim.BackendSpec{Name: backend}, Launcher: sim.BinaryLauncher{Path: self}, LeaseTTL: ttl, Seed: 1}
	// The kills are drawn over the correct service's run, as certify
	// draws them over a store's (the mutant fails the recovery probe).
	clean := base
	clean.WorkDir = filepath.Join(work, "probe")
	pr, err := sim.NewRunner(clean)
	if err != nil {
		return err
	}
	probe, err := pr.Probe(ctx)
	pr.CloseShared()
	if err != nil {
		return fmt.Errorf("random-kill replay: %w", err)
	}
	hunt := base
	hunt.WorkDir, hunt.Bugs = filepath.Join(work, "hunt"), []reference.Bug{killReplayBug}
	r, err := sim.NewRunner(hunt)
	if err != nil {
		return err
	}
	rep := r.RunAll(ctx, catalogue.RandomKills(hunt.Seed, kills, probe.Probe), parallel, nil)
	r.CloseShared()
	var hit *verdict.CaseResult
	for i, res := range rep.Results {
		if res.Case.Class == catalogue.RandomKillClass && res.Verdict == verdict.Fail {
			hit = &rep.Results[i]
			break
		}
	}
	if hit == nil {
		fmt.Fprintf(out, "random-kill replay: 0/%d (target >= 9/10: not met): none of %d random kills caught the mutant %s, nothing to replay\n", killReplays, kills, killReplayBug)
		return nil
	}
	sc, err := scenarios.FromFailure(*hit, rep, backend, ttl)
	if err != nil {
		return err
	}
	b, err := sc.Marshal()
	if err != nil {
		return err
	}
	path := filepath.Join(work, hit.Case.ID+".yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	back, err := scenarios.Load(path)
	if err != nil {
		return err
	}
	replay := back.Apply(base)
	replay.WorkDir = filepath.Join(work, "replay")
	rr, err := sim.NewRunner(replay)
	if err != nil {
		return err
	}
	n := scenarios.Replays(ctx, rr, back, killReplays)
	rr.CloseShared()
	met := "not met"
	if n*10 >= 9*killReplays {
		met = "met"
	}
	where := "a wall-clock kill"
	if _, p, k, ok := catalogue.AnchoredKill(hit.Case); ok {
		where = fmt.Sprintf("a crash at %s@%d", p, k)
	}
	fmt.Fprintf(out, "random-kill replay: %d/%d (target >= 9/10: %s): %s (%s) caught the mutant %s breaking %v; its scenario replayed %d times\n",
		n, killReplays, met, hit.Case.ID, where, killReplayBug, hit.Broken(), killReplays)
	return nil
}
