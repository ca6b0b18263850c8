// Package explorerun drives an exploration (sim/explore) for the commands
// and the test API that run one: crashmatrix explore itself (Explore: a
// seed's schedules searched, or a scenario's schedule shrunk, a finding of
// the simulated store replayed on the real one), the shape of its
// schedules from the probe, a finding written as the scenario file that
// replays it, and the exploration certify and CertifyCrashSafety run after
// the matrix (a fixed count of seeded schedules, so that the verdict does
// not depend on the machine), folded into the run's report like a failing
// case.
package explorerun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/explore"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// DefaultCount is how many schedules certify (and CertifyCrashSafety on
// the whole matrix) explores after the matrix: the smallest count that
// found, on each of a sample of seeds, every built-in mutant the matrix
// missed when this was measured (ci/bench-explore-count.sh measures it
// again).
const DefaultCount = 2645

// DefaultProcessCount is the default for a store run as processes
// (certify --store-cmd): every schedule starts its workers' store
// processes, an interpreter or a JVM each, so a schedule costs what a
// matrix case costs (the Python example: about 16 schedules a second on
// two cores, against hundreds in-process). It is still a count fixed in
// advance, so the verdict does not depend on the machine.
const DefaultProcessCount = 200

// Class is the class of the case a finding adds to a report, as the
// explorer names the schedules it generates.
const Class = "explored"

// Off is the report's line of a run that explored nothing.
const Off = "exploration: off"

// Shape is the explorer's default shape with the windows the store
// declared (the probe's), armed like the catalogue's, and the store calls
// the probe saw take two durable steps or more on the lazy mount, where
// DurableKillShare of the clients without faults are killed right after
// one (explore.Shape.DurableKill).
func Shape(p catalogue.Probe) explore.Shape {
	s := explore.DefaultShape
	s.StoreWindows = p.Windows
	s.DurableCalls = p.Durable
	s.DurableKill = DurableKillShare
	return s
}

// DurableKillShare is the share of clients without faults that a
// schedule kills right after a durable step, where the probe saw a store
// call take two or more (none elsewhere: the schedules of a store whose
// calls sync once each stay what they were).
const DurableKillShare = 0.3

// Settings are what a finding's scenario file records of the run that
// found it.
type Settings struct {
	Bugs   []reference.Bug
	Mutant string
	// Seed is the exploration's seed.
	Seed int64
	// Mode says how the schedules ran ("in-process", "process kills").
	Mode string
	// By names the run in the scenario's description ("crashmatrix
	// explore --seed 1").
	By string
}

// Scenario is the scenario of a finding: its shrunk schedule, expected to
// break the finding's invariant, under the run's bugs, mutant and seed.
func Scenario(f *explore.Finding, s Settings) (*scenarios.Scenario, check.Invariant, error) {
	inv, err := check.ParseInvariant(f.Invariant)
	if err != nil {
		return nil, "", err
	}
	sc, err := scenarios.FromCase(f.Shrunk)
	if err != nil {
		return nil, "", fmt.Errorf("writing the shrunk schedule: %w", err)
	}
	sc.Bugs, sc.Mutant, sc.Seed = s.Bugs, s.Mutant, s.Seed
	sc.Expect = scenarios.Expect{Verdict: "fail", Breaks: []check.Invariant{inv}}
	sc.Description = fmt.Sprintf("Found by %s (schedule %d, %s) and shrunk from %s to %s; breaks %s.",
		s.By, f.Index, s.Mode, explore.Describe(f.Original), explore.Describe(f.Shrunk), inv)
	return sc, inv, nil
}

// Shown is the run of a finding its scenario's comments describe: a
// confirmation run of the shrunk schedule that broke the invariant again,
// else the original schedule's.
func Shown(f *explore.Finding) verdict.CaseResult {
	if f.ShrunkResult.Case.ID == "" {
		return f.Result
	}
	return f.ShrunkResult
}

// Write writes sc into dir as NAME.yaml, headed by YAML comments (head
// first, then what shown broke and did, and the replay command that
// replay makes of the file's path); it returns the path and that command.
func Write(dir string, sc *scenarios.Scenario, inv check.Invariant, shown verdict.CaseResult, head string, replay func(path string) string) (string, string, error) {
	b, err := sc.Marshal()
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	path := filepath.Join(dir, sc.Name+".yaml")
	cmd := replay(path)
	text := append([]byte(head), Comment(inv.Short(), shown, cmd)...)
	if err := os.WriteFile(path, append(text, b...), 0o644); err != nil {
		return "", "", err
	}
	return path, cmd, nil
}

// Comment is the head of a shrunk scenario file, as YAML comments: the
// violation the explorer saw in the shrunk schedule, one line of what
// happened, the operations' short names, and the replay command.
func Comment(inv string, r verdict.CaseResult, replay string) []byte {
	vs, seq, legend := report.Explain(r, inv)
	var b strings.Builder
	for i, v := range vs {
		if i == 5 {
			fmt.Fprintf(&b, "# … and %d more %s violations\n", len(vs)-i, inv)
			break
		}
		fmt.Fprintf(&b, "# violation: %s\n", oneLine(v))
	}
	fmt.Fprintf(&b, "# what happened: %s\n", oneLine(seq))
	if len(legend) > 0 {
		fmt.Fprintf(&b, "# operations: %s\n", oneLine(strings.Join(legend, ", ")))
	}
	fmt.Fprintf(&b, "# replay: %s\n", replay)
	return []byte(b.String())
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Options are an exploration after the matrix.
type Options struct {
	// Count is how many schedules run (of the shard, when ShardCount > 1:
	// its share of the first Count indices).
	Count int
	// Seed decides the schedules; Settings.Seed is set from it.
	Seed int64
	// ShardIndex of ShardCount: only the indices i with i % ShardCount ==
	// ShardIndex (a matrix split over machines splits its exploration).
	ShardIndex, ShardCount int
	Parallel               int
	Shape                  explore.Shape
	Settings               Settings
	// Dir is where a finding's scenario file goes; Replay makes the
	// command that replays it from its path.
	Dir    string
	Replay func(path string) string
}

// Outcome is what an exploration after the matrix did.
type Outcome struct {
	explore.Result
	// Line says it for the report (sim.Report.Exploration).
	Line string
	// Case is the finding as a failing case for the report (its shrunk
	// schedule and the violations a confirmation run of it showed), or,
	// for an interrupted exploration, an undecided one; nil when the
	// schedules broke nothing.
	Case *verdict.CaseResult
	// Path is the finding's scenario file and ReplayCmd the command that
	// replays it ("" without a finding).
	Path, ReplayCmd string
}

// Run explores o.Count schedules of o.Seed on runner (stopping at the
// first that breaks an invariant, which it shrinks and writes as a
// scenario).
func Run(ctx context.Context, runner *sim.Runner, o Options) (Outcome, error) {
	if o.ShardCount < 1 {
		o.ShardCount = 1
	}
	count := o.Count / o.ShardCount
	if o.ShardIndex < o.Count%o.ShardCount {
		count++
	}
	if count <= 0 {
		return Outcome{Line: fmt.Sprintf("exploration: none of the %d schedules of seed %d falls in shard %d/%d", o.Count, o.Seed, o.ShardIndex, o.ShardCount)}, nil
	}
	res := explore.Run(ctx, runner, explore.Options{Seed: o.Seed, MaxSchedules: count, ShardIndex: o.ShardIndex, ShardCount: o.ShardCount,
		Parallel: o.Parallel, Shape: o.Shape})
	out := Outcome{Result: res}
	which := fmt.Sprintf("%d schedules of seed %d (%s)", o.Count, o.Seed, o.Settings.Mode)
	if o.ShardCount > 1 {
		which = fmt.Sprintf("the %d of shard %d/%d of %s", count, o.ShardIndex, o.ShardCount, which)
	}
	f := res.Finding
	switch {
	case f == nil && ctx.Err() != nil:
		out.Line = fmt.Sprintf("exploration: interrupted after %d of %s", res.Schedules, which)
		out.Case = &verdict.CaseResult{Case: catalogue.Case{ID: fmt.Sprintf("explored-s%d", o.Seed), Class: Class, Description: which},
			Verdict: verdict.Undecided, Notes: []string{"interrupted"}}
		return out, nil
	case f == nil:
		out.Line = fmt.Sprintf("exploration: %s, no invariant broken", which)
		if res.Skipped > 0 {
			out.Line += fmt.Sprintf(" (%d undecided)", res.Skipped)
		}
		if res.LeftOut > 0 {
			out.Line += fmt.Sprintf(" (%d left out: the service cannot run them)", res.LeftOut)
		}
		return out, nil
	}
	f.Shrunk.ID = fmt.Sprintf("explored-s%d-%d-%s", o.Seed, f.Index, strings.ToLower(f.Invariant))
	o.Settings.Seed = o.Seed
	c := Shown(f)
	c.Case = f.Shrunk
	c.Case.Class = Class
	c.Verdict = verdict.Fail
	out.Case = &c
	sc, inv, err := Scenario(f, o.Settings)
	if err != nil {
		return out, err
	}
	if svc := runner.Config().Service; svc != nil {
		// A service's scenario names it, its bugs (its own broken
		// variants too) the service's: run replays it through it.
		sc.OnService(svc.Command)
	}
	out.Path, out.ReplayCmd, err = Write(o.Dir, sc, inv, Shown(f), "", o.Replay)
	if err != nil {
		return out, err
	}
	out.Line = fmt.Sprintf("exploration: schedule %d of %s broke %s (shrunk to %s, reproduced %d/%d): %s", f.Index, which, inv.Short(),
		explore.Describe(f.Shrunk), f.Reproduced, f.Reruns, out.Path)
	c.Case.Description = fmt.Sprintf("schedule %d of the exploration (seed %d) after the matrix, shrunk; scenario %s", f.Index, o.Seed, out.Path)
	return out, nil
}

// AddTo puts the outcome into rep: its line, and its case among the
// results (the verdict and exit code then count it).
func (o Outcome) AddTo(rep *verdict.Report) {
	rep.Exploration = o.Line
	if o.Case != nil {
		rep.Results = append(rep.Results, *o.Case)
		rep.Finish()
	}
}
