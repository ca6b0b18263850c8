package bench

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
)

// killReplayBug is the reference mutant the random-kill replay figure
// hunts: only a crash shows it (a resumed operation asks the model again),
// and random kills catch it, about one kill in five.
const killReplayBug = reference.BugRecallModelOnResume

// killReplays is how many times the figure replays the finding.
const killReplays = 10

// killReplay prints how often a random kill's finding replays: random
// kills against killReplayBug until one breaks an invariant, its scenario
// written to a file and read back as certify writes it, then run
// killReplays times as `crashmatrix run --repeat 10` runs it, counting the
// runs that broke the same invariants again.
func (o *sitting) killReplay() error {
	out := o.Out
	ctx := o.ctx
	work, err := os.MkdirTemp(o.Dir, "crashmatrix-bench-kills-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	base := sim.Config{Backend: sim.BackendSpec{Name: o.Backend}, Launcher: sim.BinaryLauncher{Path: o.Self}, LeaseTTL: o.LeaseTTL, Seed: 1}
	hit, rep, err := o.hunt(base, work)
	if err != nil {
		return err
	}
	if hit == nil {
		fmt.Fprintf(out, "random-kill replay: 0/%d (target >= 9/10: not met): none of %d random kills caught the mutant %s, nothing to replay\n", killReplays, o.RandomKills, killReplayBug)
		return nil
	}
	back, err := roundTrip(work, *hit, rep, o.Backend, o.LeaseTTL)
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

// roundTrip writes the scenario of the failure hit into work and reads it
// back, as certify writes it and crashmatrix run reads it.
func roundTrip(work string, hit verdict.CaseResult, rep verdict.Report, backend string, ttl time.Duration) (*scenarios.Scenario, error) {
	sc, err := scenarios.FromFailure(hit, rep, backend, ttl)
	if err != nil {
		return nil, err
	}
	b, err := sc.Marshal()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(work, hit.Case.ID+".yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return nil, err
	}
	return scenarios.Load(path)
}

// hunt runs random kills against killReplayBug, drawn over the correct
// service's run as certify draws them over a store's (the mutant fails
// the recovery probe), and returns the first that broke an invariant
// (nil for none) and the run's report.
func (o *sitting) hunt(base sim.Config, work string) (*verdict.CaseResult, verdict.Report, error) {
	clean := base
	clean.WorkDir = filepath.Join(work, "probe")
	pr, err := sim.NewRunner(clean)
	if err != nil {
		return nil, verdict.Report{}, err
	}
	probe, err := pr.Probe(o.ctx)
	pr.CloseShared()
	if err != nil {
		return nil, verdict.Report{}, fmt.Errorf("random-kill replay: %w", err)
	}
	hunt := base
	hunt.WorkDir, hunt.Bugs = filepath.Join(work, "hunt"), []reference.Bug{killReplayBug}
	r, err := sim.NewRunner(hunt)
	if err != nil {
		return nil, verdict.Report{}, err
	}
	rep := r.RunAll(o.ctx, catalogue.RandomKills(hunt.Seed, o.RandomKills, probe.Probe), o.Parallel, nil)
	r.CloseShared()
	for i, res := range rep.Results {
		if res.Case.Class == catalogue.RandomKillClass && res.Verdict == verdict.Fail {
			return &rep.Results[i], rep, nil
		}
	}
	return nil, rep, nil
}
