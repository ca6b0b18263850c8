package scenarios

import (
	"context"
	"fmt"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// FromFailure writes a case of rep that failed as a scenario expecting it
// to fail again, breaking the same invariants, with the run settings it
// failed under (backend, bugs, mutant, seed, lease TTL): what certify
// writes for a random kill that broke an invariant, and what a replay of
// it runs.
func FromFailure(res verdict.CaseResult, rep verdict.Report, backend string, leaseTTL time.Duration) (*Scenario, error) {
	if res.Verdict != verdict.Fail {
		return nil, fmt.Errorf("case %s: verdict %s, not FAIL: nothing to replay", res.Case.ID, res.Verdict)
	}
	sc, err := FromCase(res.Case)
	if err != nil {
		return nil, err
	}
	sc.Backend, sc.LeaseTTL, sc.Seed, sc.Mutant = backend, leaseTTL, rep.Seed, rep.Mutant
	for _, b := range rep.Bugs {
		sc.Bugs = append(sc.Bugs, reference.Bug(b))
	}
	sc.Expect.Verdict = ExpectFail
	for _, b := range res.Broken() {
		inv, err := check.ParseInvariant(b)
		if err != nil {
			return nil, err
		}
		sc.Expect.Breaks = append(sc.Expect.Breaks, inv)
	}
	return sc, nil
}

// OnService makes s a scenario of the service command starts (through
// the service protocol): the scenario's bugs become the service's. What
// certify does to a failing case of a run with --service-cmd, so that run
// replays it through the same service, its broken variant included.
func (s *Scenario) OnService(command string) {
	s.Service = &Service{Command: command, Bugs: s.Bugs}
	s.Bugs = nil
}

// Replays runs s n times on r, a runner configured with s.Apply, and
// counts the runs that met the scenario's expectation.
func Replays(ctx context.Context, r *sim.Runner, s *Scenario, n int) int {
	met := 0
	for i := 0; i < n; i++ {
		if s.JudgeResult(r.RunCase(ctx, s.Case())) == nil {
			met++
		}
	}
	return met
}
