package scenariorun

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// replays is what the replays of one scenario showed.
type replays struct {
	first verdict.CaseResult
	// same is "ok" when every replay agreed with the first, else how
	// one differed.
	same string
	// killed: the scenario has a wall-clock kill, whose replays are
	// counted (reproduced of them met the expectation), not required
	// to agree.
	killed     bool
	reproduced int
}

// scenario replays one scenario, judges it and prints its line. failed
// says it did not meet its expectation (for the progress lines); a
// non-zero code or an error ends the run.
func (r *run) scenario(s *scenarios.Scenario) (failed bool, code int, err error) {
	if err := s.CheckBackend(r.o.Want); err != nil && s.Backend != "" {
		fmt.Fprintf(r.out, "SKIP  %-45s %v\n", s.Name, err)
		return false, 0, nil
	}
	runner, cfg, err := r.runner(s)
	if err != nil {
		fmt.Fprintln(r.o.Stderr, "crashmatrix:", err)
		return false, 2, nil
	}
	rp := r.replay(runner, s)
	runner.CloseShared()
	if err := report.SaveTimeline(cfg.WorkDir, &rp.first); err != nil {
		return false, 0, err
	}
	jerr := r.judge(s, rp)
	return rp.first.Verdict != verdict.Undecided && (jerr != nil || rp.same != "ok"), 0, nil
}

// replay runs scenario s as often as asked and compares each replay with
// the first.
func (r *run) replay(runner *sim.Runner, s *scenarios.Scenario) replays {
	// A wall-clock kill lands where the worker's timing puts it: its
	// replays are counted, not required to agree (a random kill at a
	// store call or commit is a crash like any other, and must agree).
	rp := replays{same: "ok", killed: slices.ContainsFunc(s.Steps, func(st scenarios.Step) bool { return st.Kill != nil })}
	var firstTrace []string
	for i := 0; i < max(r.o.Repeat, 1); i++ {
		res := runner.RunCase(r.ctx, s.Case())
		if rp.killed && s.JudgeResult(res) == nil {
			rp.reproduced++
		}
		if i == 0 {
			rp.first, firstTrace = res, history.Trace(res.Timeline)
			r.replays[res.Case.ID] = r.o.Replay(r.o.Paths[s])
			continue
		}
		if rp.killed {
			continue
		}
		if res.Verdict != rp.first.Verdict || !slices.Equal(res.Broken(), rp.first.Broken()) {
			rp.same = fmt.Sprintf("run %d gave %s %v, run 1 gave %s %v", i+1, res.Verdict, res.Broken(), rp.first.Verdict, rp.first.Broken())
			break
		}
		if tr := history.Trace(res.Timeline); !slices.Equal(tr, firstTrace) {
			rp.same = fmt.Sprintf("run %d's history differs from run 1's at record %d", i+1, firstDiff(tr, firstTrace))
			break
		}
	}
	return rp
}

// judge judges scenario s by its replays, prints its line (and with
// Details its case), records it for the reports and returns why it did
// not meet its expectation (nil if it did).
func (r *run) judge(s *scenarios.Scenario, rp replays) error {
	first, repeat := rp.first, max(r.o.Repeat, 1)
	r.all = append(r.all, first)
	jerr := s.JudgeResult(first)
	if rp.killed && rp.reproduced > 0 {
		jerr = nil // judged over all replays below
	}
	// The reports judge the scenario as this line does.
	expect := &verdict.Expectation{}
	r.all[len(r.all)-1].Expect = expect
	switch {
	case first.Verdict == verdict.Undecided:
		expect.Note = "undecided: " + strings.Join(first.Notes, "; ")
		fmt.Fprintf(r.out, "UNDEC %-45s %s\n", s.Name, strings.Join(first.Notes, "; "))
		r.code = max(r.code, 2)
	case jerr != nil:
		expect.Note = jerr.Error()
		fmt.Fprintf(r.out, "FAIL  %-45s %v\n", s.Name, jerr)
		r.code = max(r.code, 1)
	case rp.same != "ok":
		expect.Note = "not deterministic: " + rp.same
		fmt.Fprintf(r.out, "FAIL  %-45s not deterministic: %s\n", s.Name, rp.same)
		r.code = max(r.code, 1)
	default:
		broke := "all invariants held"
		if b := first.Broken(); len(b) > 0 {
			broke = "broke " + strings.Join(b, ",") + " as expected"
		}
		if rp.killed {
			broke = fmt.Sprintf("wall-clock kill: %d of %d replays matched the expectation", rp.reproduced, repeat)
		}
		expect.Met, expect.Note = true, broke
		fmt.Fprintf(r.out, "ok    %-45s %s %s (%s, %dx %s)\n", s.Name, first.Verdict, broke, first.Took.Round(time.Millisecond), repeat, r.mode())
	}
	if r.o.Details {
		printCase(r.out, first, r.replays[first.Case.ID])
	}
	return jerr
}

// mode names the run's execution mode on a scenario's line.
func (r *run) mode() string {
	if r.o.Config.InProcess {
		return "in-process"
	}
	return "process kills"
}
