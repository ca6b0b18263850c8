package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// probeCases run the scripts of the matrix without faults (System A's
// client script, recovery after a crash before the graph write, and System
// B's script when the backend has it) so that every store method they call
// declares its windows.
func (r *Runner) probeCases() []catalogue.Case {
	cs := []catalogue.Case{
		{ID: "probe-ingest", System: faults.Ingestion, Class: "probe", Description: "fault-free run of the standard script: discovers store windows, measures the worker",
			Steps: []catalogue.Step{{Worker: "fault", Actions: catalogue.StandardScript()}, catalogue.RecoverStep("recover", nil), catalogue.QuiesceStep(faults.Ingestion, "fault")}},
		{ID: "probe-recovery", System: faults.Ingestion, Class: "probe", Description: "recovery after a crash before the graph write: discovers the store windows only recovery reaches",
			Steps: []catalogue.Step{{Worker: "setup", Actions: catalogue.StandardScript(), Arms: faults.Arms{faults.BeforeGraphWrite: faults.On(faults.Crash, 1)}, ExpectHit: []faults.Point{faults.BeforeGraphWrite}},
				{Worker: "fault", Actions: []catalogue.Action{{Do: "recover", Rounds: 3}}, ContinueOnError: true}, catalogue.QuiesceStep(faults.Ingestion, "setup")}},
	}
	if r.backend.OpenPlanSave != nil {
		cs = append(cs, catalogue.Case{ID: "probe-plansave", System: faults.PlanSave, Class: "probe", Description: "fault-free run of the plan-save script: discovers store windows",
			Steps: []catalogue.Step{{Worker: "fault", Actions: catalogue.PlanSaveScript()}, catalogue.QuiesceStep(faults.PlanSave)}})
	}
	return slices.DeleteFunc(cs, r.serviceCannot)
}

// Probe runs the probe cases. An error means a probe case did not pass
// (the store fails without any fault); the probe then holds what the cases
// before it found.
func (r *Runner) Probe(ctx context.Context) (verdict.Probe, error) {
	var pr verdict.Probe
	if err := r.fixedTTLGate(ctx); err != nil {
		return pr, err
	}
	found := map[faults.Point]*catalogue.StoreWindow{}
	var order []faults.Point
	for _, c := range r.probeCases() {
		res := r.RunCase(ctx, c)
		if c.ID == "probe-ingest" {
			pr.Base = res.FaultWorkerTime()
			pr.Calls, pr.Commits = res.FaultWorkerInstants()
			for i := 1; i < baseRuns && res.Verdict == verdict.Pass; i++ {
				if again := r.RunCase(ctx, c); again.Verdict == verdict.Pass {
					pr.Base = min(pr.Base, again.FaultWorkerTime())
					calls, commits := again.FaultWorkerInstants()
					pr.Calls, pr.Commits = min(pr.Calls, calls), min(pr.Commits, commits)
				}
			}
		}
		pr.Results = append(pr.Results, res)
		if res.Verdict != verdict.Pass {
			return pr, fmt.Errorf("probe %s: %s without any fault: %s %s", c.ID, res.Verdict, strings.Join(res.Broken(), ","), strings.Join(res.Notes, "; "))
		}
		// A window the client script's worker reaches is a client window,
		// counted there; any other (reached by recovery, or only by the
		// quiesce step) is a recovery window, counted in probe-recovery's
		// recovering worker.
		for _, rec := range res.Timeline {
			if rec.Kind != history.Reach {
				continue
			}
			w := found[rec.Point]
			if w == nil {
				w = &catalogue.StoreWindow{Point: rec.Point, System: c.System, InRecovery: true}
				found[rec.Point] = w
				order = append(order, rec.Point)
			}
			switch {
			case rec.Worker == "fault" && c.ID != "probe-recovery":
				if w.InRecovery {
					w.InRecovery, w.Hits = false, 0
				}
				w.Hits++
			case rec.Worker == "fault" && w.InRecovery:
				w.Hits++
			}
			if !slices.Contains(w.Methods, rec.Method) {
				w.Methods = append(w.Methods, rec.Method)
			}
		}
	}
	for _, p := range order {
		pr.Windows = append(pr.Windows, *found[p])
	}
	calls, results, err := r.probeStaleCalls(ctx)
	pr.Results = append(pr.Results, results...)
	pr.StaleCalls = calls
	if err != nil {
		return pr, err
	}
	pr.Durable, results, err = r.probeDurable(ctx)
	pr.Results = append(pr.Results, results...)
	if err != nil {
		return pr, err
	}
	pr.ServerDurable, results, err = r.probeServerDurable(ctx)
	pr.Results = append(pr.Results, results...)
	return pr, err
}

// baseRuns is how many fault-free runs measure the random kills' span.
const baseRuns = 3

// anchorLine is the text a kill anchor matches: the record's trace line.
func anchorLine(r history.Record) string { return lastEventText(r) }

// anchorKills returns c with each random kill that fired anchored to the
// last record its worker wrote before it (see RandomKill.After).
func anchorKills(c catalogue.Case, h history.Log) catalogue.Case {
	var steps []catalogue.Step
	for i, st := range c.Steps {
		if st.Kill == nil || st.Kill.After != "" {
			continue
		}
		var last *history.Record
		count := 0
		for j := range h {
			rec := &h[j]
			if rec.Worker != st.Worker {
				continue
			}
			if rec.Kind == history.Kill {
				if last != nil {
					line := anchorLine(*last)
					for _, x := range h[:j] {
						if x.Worker == st.Worker && anchorLine(x) == line {
							count++
						}
					}
					if steps == nil {
						steps = slices.Clone(c.Steps)
					}
					k := *st.Kill
					k.After, k.AfterIndex, k.Delta = line, count, time.Duration(rec.Since)*time.Microsecond
					steps[i].Kill = &k
				}
				break
			}
			last = rec
		}
	}
	if steps != nil {
		c.Steps = steps
	}
	return c
}

// rescaleKills keeps each random kill at the same fraction of its span
// when a worker was already seen to finish faster than the span the kill
// was drawn over: the machine got faster (a neighbour went quiet), and an
// offset beyond the run would never fire. The returned case carries the
// offsets actually used (what a replay file records).
func (r *Runner) rescaleKills(c catalogue.Case) catalogue.Case {
	fast := time.Duration(r.killBase.Load())
	if fast <= 0 {
		return c
	}
	var steps []catalogue.Step
	for i, st := range c.Steps {
		if st.Kill == nil || st.Kill.Base <= fast {
			continue
		}
		if steps == nil {
			steps = slices.Clone(c.Steps)
		}
		k := *st.Kill
		k.Offset = max(time.Duration(float64(k.Offset)*float64(fast)/float64(k.Base)).Truncate(time.Microsecond), time.Microsecond)
		k.Base = fast.Truncate(time.Microsecond)
		steps[i].Kill = &k
	}
	if steps != nil {
		c.Steps = steps
	}
	return c
}

// learnKillBase notes how long a worker whose random kill did not fire
// took to finish (see rescaleKills).
func (r *Runner) learnKillBase(c catalogue.Case, h history.Log) {
	for _, st := range c.Steps {
		if st.Kill == nil {
			continue
		}
		for _, rec := range h {
			if rec.Worker == st.Worker && rec.Kind == history.Exit {
				took := int64(time.Duration(rec.Micros) * time.Microsecond)
				for {
					old := r.killBase.Load()
					if (old != 0 && old <= took) || took <= 0 || r.killBase.CompareAndSwap(old, took) {
						break
					}
				}
			}
		}
	}
}

// killNotes says where each random kill of a case landed: its seed and
// offset, and the last thing the worker recorded before it died. ok is
// false when a worker finished before its kill (not exercised).
func killNotes(c catalogue.Case, h history.Log) (notes []string, ok bool) {
	ok = true
	if w, p, hit, anchored := catalogue.AnchoredKill(c); anchored && c.Class == catalogue.RandomKillClass {
		// Whether it fired is the ExpectHit's to judge; the note says where.
		var last *history.Record
		for i := range h {
			rec := &h[i]
			if rec.Worker != w {
				continue
			}
			if rec.Kind == history.Hit && rec.Point == p {
				break
			}
			last = rec
		}
		lastText := "nothing"
		if last != nil {
			lastText = lastEventText(*last)
		}
		notes = append(notes, fmt.Sprintf("random kill of worker %s: seed %s, a crash at %s@%d (a replay kills there again); last history event before the kill: %s",
			w, strings.TrimPrefix(c.ID, catalogue.RandomKillClass+"-"), p, hit, lastText))
	}
	for _, st := range c.Steps {
		if st.Kill == nil {
			continue
		}
		var last *history.Record
		killed := false
		for i := range h {
			rec := &h[i]
			if rec.Worker != st.Worker {
				continue
			}
			if rec.Kind == history.Kill {
				killed = true
				break
			}
			if rec.Kind == history.Exit {
				break
			}
			last = rec
		}
		if !killed {
			ok = false
			notes = append(notes, fmt.Sprintf("random kill of worker %s (seed %d, offset %s) did not fire: the worker finished first", st.Worker, st.Kill.Seed, st.Kill.Offset))
			continue
		}
		lastText := "nothing"
		if last != nil {
			lastText = lastEventText(*last)
		}
		notes = append(notes, fmt.Sprintf("random kill of worker %s: seed %d, offset %s (of a %s fault-free run); last history event before the kill: %s",
			st.Worker, st.Kill.Seed, st.Kill.Offset, st.Kill.Base, lastText))
	}
	return notes, ok
}

// lastEventText renders a record as the history's trace does (without
// what differs between replays), or "start" for a start record.
func lastEventText(r history.Record) string { return worker.AnchorLine(r) }
