package sim

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
)

// StoreWindow is a crash window a store declared inside its own code
// (faults.At), as the probe run found it.
type StoreWindow struct {
	Point faults.Point `json:"point"`
	// Methods are the store functions that reached the point.
	Methods []string      `json:"methods"`
	System  faults.System `json:"system"`
	// Hits is how often the probe's worker passed the point.
	Hits int `json:"hits"`
	// InRecovery: only recovery reached it (after a crash before the
	// graph write), never a client's first run.
	InRecovery bool `json:"inRecovery,omitempty"`
}

// Spec is the window as a catalogue entry, so that the matrix builds its
// cases like a catalogue window's.
func (w StoreWindow) Spec() faults.Spec {
	m := strings.Join(w.Methods, ", ")
	return faults.Spec{Point: w.Point, System: w.System, Step: "the step after window " + string(w.Point),
		Window:   "inside " + m + ", declared by the store",
		Recovery: "whatever the store committed before the window must leave the protocol recoverable",
		Kinds:    faults.StoreKinds, InRecovery: w.InRecovery}
}

// Probe is what a fault-free run of the matrix's scripts showed: the
// windows the store declared, and how long the standard fault worker took
// (the span random kills are drawn from).
type Probe struct {
	Windows []StoreWindow `json:"windows,omitempty"`
	// Base is the standard fault worker's own run time, from its start to
	// its exit, without faults: the shortest of baseRuns runs, so that a
	// kill drawn below it fires on all but unusually fast runs.
	Base time.Duration `json:"base"`
	// Calls and Commits are the same worker's store calls (outside fenced
	// steps, faults.StoreCall) and write commits of its embedded database
	// (faults.StoreCommit; 0 where the harness does not see them): the
	// fewest of its fault-free runs. Random kills are drawn over them.
	Calls   int `json:"calls,omitempty"`
	Commits int `json:"commits,omitempty"`
	// StaleCalls counts, for each lease fault kind, the store calls of the
	// stale holder of its case when nobody competes: the between-calls
	// cases sweep them (sim/between.go).
	StaleCalls map[faults.Kind]int `json:"staleCalls,omitempty"`
	// Durable are the store calls of the same worker and the durable file
	// operations each made on a lazy mount (probe-durable; none where the
	// runner has no lazy mount): the durable-step sweep is drawn from them
	// (sim/durable.go).
	Durable []DurableCall `json:"durable,omitempty"`
	// Results are the probe cases, which must pass like any case.
	Results []CaseResult `json:"-"`
}

// probeCases run the scripts of the matrix without faults (System A's
// client script, recovery after a crash before the graph write, and System
// B's script when the backend has it) so that every store method they call
// declares its windows.
func (r *Runner) probeCases() []Case {
	cs := []Case{
		{ID: "probe-ingest", System: faults.Ingestion, Class: "probe", Description: "fault-free run of the standard script: discovers store windows, measures the worker",
			Steps: []Step{{Worker: "fault", Actions: StandardScript()}, recoverStep("recover", nil), quiesceStep(faults.Ingestion, "fault")}},
		{ID: "probe-recovery", System: faults.Ingestion, Class: "probe", Description: "recovery after a crash before the graph write: discovers the store windows only recovery reaches",
			Steps: []Step{{Worker: "setup", Actions: StandardScript(), Arms: faults.Arms{faults.BeforeGraphWrite: faults.On(faults.Crash, 1)}, ExpectHit: []faults.Point{faults.BeforeGraphWrite}},
				{Worker: "fault", Actions: []Action{{Do: "recover", Rounds: 3}}, ContinueOnError: true}, quiesceStep(faults.Ingestion, "setup")}},
	}
	if r.backend.OpenPlanSave != nil {
		cs = append(cs, Case{ID: "probe-plansave", System: faults.PlanSave, Class: "probe", Description: "fault-free run of the plan-save script: discovers store windows",
			Steps: []Step{{Worker: "fault", Actions: PlanSaveScript()}, quiesceStep(faults.PlanSave)}})
	}
	return cs
}

// Probe runs the probe cases. An error means a probe case did not pass
// (the store fails without any fault); the probe then holds what the cases
// before it found.
func (r *Runner) Probe(ctx context.Context) (Probe, error) {
	var pr Probe
	if err := r.fixedTTLGate(ctx); err != nil {
		return pr, err
	}
	found := map[faults.Point]*StoreWindow{}
	var order []faults.Point
	for _, c := range r.probeCases() {
		res := r.RunCase(ctx, c)
		if c.ID == "probe-ingest" {
			pr.Base = res.faultWorkerTime()
			pr.Calls, pr.Commits = res.faultWorkerInstants()
			for i := 1; i < baseRuns && res.Verdict == Pass; i++ {
				if again := r.RunCase(ctx, c); again.Verdict == Pass {
					pr.Base = min(pr.Base, again.faultWorkerTime())
					calls, commits := again.faultWorkerInstants()
					pr.Calls, pr.Commits = min(pr.Calls, calls), min(pr.Commits, commits)
				}
			}
		}
		pr.Results = append(pr.Results, res)
		if res.Verdict != Pass {
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
				w = &StoreWindow{Point: rec.Point, System: c.System, InRecovery: true}
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
	return pr, err
}

// baseRuns is how many fault-free runs measure the random kills' span.
const baseRuns = 3

// faultWorkerTime is the fault worker's own run time (its exit record).
func (cr CaseResult) faultWorkerTime() time.Duration {
	for _, rec := range cr.Timeline {
		if rec.Worker == "fault" && rec.Kind == history.Exit {
			return time.Duration(rec.Micros) * time.Microsecond
		}
	}
	return 0
}

// faultWorkerInstants are the fault worker's store calls and commits (its
// exit record).
func (cr CaseResult) faultWorkerInstants() (calls, commits int) {
	for _, rec := range cr.Timeline {
		if rec.Worker == "fault" && rec.Kind == history.Exit {
			return rec.Calls, rec.Commits
		}
	}
	return 0, 0
}

// StoreMatrix returns every store window x every store fault kind, built
// like the catalogue's windows (the fault worker must hit the point, a
// crash must end it by the kill, something must complete afterwards).
func StoreMatrix(ws []StoreWindow, leaseTTLMillis int64) []Case {
	var out []Case
	for _, w := range ws {
		for _, k := range faults.StoreKinds {
			c, _ := windowCase(w.Spec(), k, leaseTTLMillis)
			c.Store = true
			out = append(out, c)
		}
	}
	return out
}

// RandomKillClass is the case class of random-instant kills.
const RandomKillClass = "random-kill"

// RandomKill kills a worker at an instant of its run rather than at a
// failpoint: Offset after its start, drawn from Seed over Base, the
// measured duration of the same worker's fault-free run.
type RandomKill struct {
	Seed   int64         `json:"seed" yaml:"seed"`
	Offset time.Duration `json:"offset" yaml:"offset"`
	// Base is the fault-free duration the offset was drawn from (for the
	// report; a replay uses Offset as it is).
	Base time.Duration `json:"base,omitempty" yaml:"base,omitempty"`
	// After, AfterIndex and Delta anchor the kill to the worker's own
	// history, as the run that drew it saw it: Delta after the
	// AfterIndex-th record whose trace line is After (the last record
	// before the kill). A replay with an anchor kills there instead of at
	// Offset, so that how long the run took to get there (process start,
	// a busy machine) no longer moves the kill.
	After      string        `json:"after,omitempty" yaml:"after,omitempty"`
	AfterIndex int           `json:"afterIndex,omitempty" yaml:"afterIndex,omitempty"`
	Delta      time.Duration `json:"delta,omitempty" yaml:"delta,omitempty"`
}

// armRandomKill sets up a worker's random-instant kill, if it has one:
// KillAfterMicros after its start, or KillDeltaMicros after its anchor
// record. The kill record says how long after the worker's previous record
// it came (the anchor of a replay). The returned function disarms a kill
// that has not fired.
func armRandomKill(spec WorkerSpec, hist *history.Writer, pid int, began time.Time) (disarm func()) {
	if spec.KillAfterMicros <= 0 && spec.KillAnchor == "" {
		return func() {}
	}
	var mu sync.Mutex
	last, seen := began, 0 // the start record was written just before began
	delta := time.Duration(spec.KillDeltaMicros) * time.Microsecond
	killNow := func() {
		mu.Lock()
		since := time.Since(last)
		mu.Unlock()
		hist.Append(history.Record{Kind: history.Kill, PID: pid, Micros: time.Since(began).Microseconds(), Since: since.Microseconds()})
		// The worker's other goroutines run on until the signal lands:
		// none may start a record the kill could tear.
		hist.Kill()
		KillSelf(faults.Hit{})
	}
	hist.Observe(func(rec history.Record) {
		mu.Lock()
		last = time.Now()
		fire := false
		if spec.KillAnchor != "" && rec.Kind != history.Kill && anchorLine(rec) == spec.KillAnchor {
			seen++
			fire = seen == spec.KillAnchorIndex
		}
		mu.Unlock()
		if fire {
			time.AfterFunc(delta, killNow)
		}
	})
	var timer *time.Timer
	switch spec.KillAnchor {
	case "":
		timer = time.AfterFunc(time.Duration(spec.KillAfterMicros)*time.Microsecond, killNow)
	case string(history.Start):
		// Killed before its first action: the start record is written.
		timer = time.AfterFunc(delta, killNow)
	}
	return func() {
		if timer != nil {
			timer.Stop()
		}
	}
}

// anchorLine is the text a kill anchor matches: the record's trace line.
func anchorLine(r history.Record) string { return lastEventText(r) }

// anchorKills returns c with each random kill that fired anchored to the
// last record its worker wrote before it (see RandomKill.After).
func anchorKills(c Case, h history.Log) Case {
	var steps []Step
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

// KillOffset draws the kill instant of a seed over a fault-free run of
// duration base: the same seed and base give the same offset, to the
// microsecond (what a worker's timer and a scenario file hold).
func KillOffset(seed int64, base time.Duration) time.Duration {
	r := rand.New(rand.NewPCG(uint64(seed), 0x6b696c6c))
	us := max(base.Microseconds(), 1)
	return time.Duration(1+r.Int64N(us)) * time.Microsecond
}

// RandomKillSeed is the seed of the i-th random kill of a run seeded seed.
func RandomKillSeed(seed int64, i int) int64 { return seed*1_000_003 + int64(i) }

// RandomKillCase is the standard script's fault worker killed at a seeded
// instant of its run, then the restart: the quiesce step resubmits what
// the killed worker's callers saw unfinished and runs recovery (one
// process fewer than a window case, whose separate recovery worker may
// itself be the one a fault hits).
//
// The instant is one the harness controls and numbers (KillInstant): before
// the worker's k-th store call (a crash at faults.StoreCall, hit k) or
// inside its j-th write commit of the embedded database (faults.StoreCommit,
// hit j), drawn uniformly over the calls and commits the probe counted. The
// kill is a real SIGKILL at a failpoint, so a replay of its scenario
// kills at the same place. Where the harness sees no commits (a server, a
// store process), a kill inside a store call can only be placed by the
// wall clock: every other seed there is a wall-clock kill (WallClockKillCase),
// which cannot replay by construction.
func RandomKillCase(seed int64, pr Probe) Case {
	p, hit, ok := KillInstant(seed, pr.Calls, pr.Commits)
	if !ok {
		return WallClockKillCase(seed, pr.Base)
	}
	at := fmt.Sprintf("before its store call %d of %d", hit, pr.Calls)
	if p == faults.StoreCommit {
		at = fmt.Sprintf("inside its write commit %d of %d, before the commit is durable", hit, pr.Commits)
	}
	return Case{ID: fmt.Sprintf("random-kill-%d", seed), System: faults.Ingestion, Class: RandomKillClass,
		Description: fmt.Sprintf("the standard script's worker is SIGKILLed %s (seed %d: a crash at %s@%d, replayable)", at, seed, p, hit),
		Steps: []Step{{Worker: "fault", Actions: StandardScript(), Arms: faults.Arms{p: faults.On(faults.Crash, hit)}, ExpectHit: []faults.Point{p}},
			quiesceStep(faults.Ingestion, "fault")}}
}

// KillInstant draws a random kill's instant from seed over a worker's
// calls store calls and commits write commits: the point (faults.StoreCall
// or faults.StoreCommit) and its hit. ok is false when the kill is to be
// placed by the wall clock instead: nothing counted, or, where no commit
// is seen, every other seed (a kill inside a store call).
func KillInstant(seed int64, calls, commits int) (p faults.Point, hit int, ok bool) {
	r := rand.New(rand.NewPCG(uint64(seed), 0x63616c6c))
	if calls+commits <= 0 || commits == 0 && r.IntN(2) == 0 {
		return "", 0, false
	}
	x := 1 + r.IntN(calls+commits)
	if x <= calls {
		return faults.StoreCall, x, true
	}
	return faults.StoreCommit, x - calls, true
}

// WallClockKillCase is the standard script's fault worker SIGKILLed at a
// seeded offset into its run, drawn over base (its measured fault-free
// run): an instant the harness does not control. Its scenario records the
// offset and an anchor in the worker's history, but where the kill lands
// on a replay is up to the machine's timing.
func WallClockKillCase(seed int64, base time.Duration) Case {
	k := RandomKill{Seed: seed, Offset: KillOffset(seed, base), Base: base}
	return Case{ID: fmt.Sprintf("random-kill-%d", seed), System: faults.Ingestion, Class: RandomKillClass,
		Description: fmt.Sprintf("the standard script's worker is SIGKILLed %s into its run (seed %d, of a %s fault-free run), not at a failpoint: a wall-clock instant, not replayable by construction",
			k.Offset.Round(time.Microsecond), seed, base.Round(time.Microsecond)),
		Steps: []Step{{Worker: "fault", Actions: StandardScript(), Kill: &k}, quiesceStep(faults.Ingestion, "fault")}}
}

// AnchoredKill returns the point and hit of a case's anchored random kill
// (a crash at faults.StoreCall or faults.StoreCommit); ok is false for a
// case without one.
func AnchoredKill(c Case) (worker string, p faults.Point, hit int, ok bool) {
	for _, st := range c.Steps {
		for _, pt := range []faults.Point{faults.StoreCall, faults.StoreCommit} {
			if a, armed := st.Arms[pt]; armed && a.Kind == faults.Crash {
				return st.Worker, pt, a.Hit, true
			}
		}
	}
	return "", "", 0, false
}

// rescaleKills keeps each random kill at the same fraction of its span
// when a worker was already seen to finish faster than the span the kill
// was drawn over: the machine got faster (a neighbour went quiet), and an
// offset beyond the run would never fire. The returned case carries the
// offsets actually used (what a replay file records).
func (r *Runner) rescaleKills(c Case) Case {
	fast := time.Duration(r.killBase.Load())
	if fast <= 0 {
		return c
	}
	var steps []Step
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
func (r *Runner) learnKillBase(c Case, h history.Log) {
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

// RandomKills returns n random-kill cases of a run seeded seed, drawn over
// what the probe measured.
func RandomKills(seed int64, n int, pr Probe) []Case {
	out := make([]Case, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, RandomKillCase(RandomKillSeed(seed, i), pr))
	}
	return out
}

// killNotes says where each random kill of a case landed: its seed and
// offset, and the last thing the worker recorded before it died. ok is
// false when a worker finished before its kill (not exercised).
func killNotes(c Case, h history.Log) (notes []string, ok bool) {
	ok = true
	if w, p, hit, anchored := AnchoredKill(c); anchored && c.Class == RandomKillClass {
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
			w, strings.TrimPrefix(c.ID, RandomKillClass+"-"), p, hit, lastText))
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
func lastEventText(r history.Record) string {
	if t := history.Trace(history.Log{r}); len(t) > 0 {
		return t[0]
	}
	return string(r.Kind)
}

// storeWindowsOf lists the store windows of a run's cases, sorted.
func storeWindowsOf(results []CaseResult) []faults.Point {
	seen := map[faults.Point]bool{}
	var out []faults.Point
	for _, r := range results {
		if r.Case.Store && !seen[r.Case.Point] {
			seen[r.Case.Point] = true
			out = append(out, r.Case.Point)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Selection is what a certification runs: the catalogue's matrix and case
// classes narrowed by Points, Kinds and Classes (empty = all; a store
// window's name selects it like a catalogue point), the windows the probe
// found in the store, and RandomKills random-instant kills.
type Selection struct {
	Points      []faults.Point
	Kinds       []faults.Kind
	Classes     []string
	RandomKills int
	// PowerLoss adds the power-loss column (PowerLossMatrix), narrowed
	// like the rest; set it where Runner.PowerLossUntested is "".
	PowerLoss bool
	// TornWrite adds the torn-write column (TornWriteMatrix), narrowed
	// like the rest: asked for by its kind, or on an embedded backend by
	// no kind (PowerLossSelection, sim/torndefault.go). Tear is its unit
	// (0 or faults.TearSector for 512-byte sectors, a smaller power of two
	// down to faults.TearByte inside one sector, faults.TearPage for
	// pages).
	TornWrite bool
	Tear      int
}

// Cases returns the cases of a selection: the catalogue's matrix and case
// classes, the store windows of the probe, then the random kills (drawn
// over the probe's measured fault-free run, seeded by seed).
func (s Selection) Cases(pr Probe, leaseTTLMillis, seed int64) []Case {
	cases := Filter(append(Matrix(leaseTTLMillis), StoreMatrix(pr.Windows, leaseTTLMillis)...), s.Points, s.Kinds, s.Classes)
	if s.PowerLoss {
		cases = append(cases, Filter(PowerLossMatrix(pr.Windows, leaseTTLMillis), s.Points, s.Kinds, s.Classes)...)
	}
	if s.TornWrite {
		cases = append(cases, Filter(TornWriteMatrix(pr.Windows, cmp.Or(s.Tear, defaultTear), leaseTTLMillis), s.Points, s.Kinds, s.Classes)...)
	}
	cases = append(cases, s.betweenCalls(BetweenCallsCases(pr.StaleCalls, leaseTTLMillis))...)
	if s.PowerLoss {
		// The sweep needs the lazy mount the power-loss column runs on.
		cases = append(cases, s.durableSteps(DurableStepCases(pr.Durable))...)
	}
	if s.RandomKills > 0 && s.RandomKillsLeftOut() == "" {
		cases = append(cases, RandomKills(seed, s.RandomKills, pr)...)
	}
	return cases
}

// RandomKillsLeftOut says why a selection that asks for random kills runs
// none ("" when it runs them): they are a class of their own, left out by
// a point or kind (a random instant is no window and no fault kind) and
// by a class filter that does not name it. Asking for them there is an
// error: the run would certify without them and not say so.
func (s Selection) RandomKillsLeftOut() string {
	switch {
	case s.RandomKills == 0:
		return ""
	case len(s.Points) > 0 || len(s.Kinds) > 0:
		return fmt.Sprintf("%d random kills asked for with a point or kind filter: a random kill is at no window and of no fault kind, so the filter leaves them all out (run them alone, or with the class %s)", s.RandomKills, RandomKillClass)
	case len(s.Classes) > 0 && !slices.Contains(s.Classes, RandomKillClass):
		return fmt.Sprintf("%d random kills asked for with a class filter that leaves them out: add the class %s", s.RandomKills, RandomKillClass)
	}
	return ""
}

// Whole reports whether the selection is the whole matrix (no point,
// kind or class narrows it).
func (s Selection) Whole() bool {
	return len(s.Points) == 0 && len(s.Kinds) == 0 && len(s.Classes) == 0
}

// Describe is the selection as the command-line filter that chose it
// ("--point a,b --kind crash --class c"); "" for the whole matrix.
func (s Selection) Describe() string {
	var parts []string
	join := func(flag string, vs []string) {
		if len(vs) > 0 {
			parts = append(parts, flag+" "+strings.Join(vs, ","))
		}
	}
	var ps, ks []string
	for _, p := range s.Points {
		ps = append(ps, string(p))
	}
	for _, k := range s.Kinds {
		ks = append(ks, string(k))
	}
	join("--point", ps)
	join("--kind", ks)
	join("--class", s.Classes)
	return strings.Join(parts, " ")
}

// WithProbe records in a report what the probe found. A probe that did not
// pass fails the report with its cases when the run is the whole matrix;
// a narrowed run judges only the cases it selected.
func (rep *Report) WithProbe(pr Probe, err error, sel Selection) {
	// A probe that failed found nothing to report: saying "the probe
	// found none" would claim a probe that did not run to its end.
	rep.Probed = err == nil
	rep.StoreWindows = pr.Windows
	rep.DurableCalls = len(pr.Durable)
	for _, c := range pr.Durable {
		if len(c.Ops) > 1 {
			rep.DurableMulti++
		}
	}
	rep.Subset = sel.Describe()
	if err != nil && sel.Whole() {
		for _, r := range pr.Results {
			if r.Verdict != Pass {
				rep.Results = append(rep.Results, r)
			}
		}
		rep.finish()
	}
}
