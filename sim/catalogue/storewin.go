package catalogue

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
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
	// (sim/casefaults/durable.go).
	Durable []DurableCall `json:"durable,omitempty"`
	// ServerDurable are, for each database server whose data directory is
	// on a lazy mount (--backend containers), the same worker's store
	// calls during which the server made a durable file operation, and
	// those operations (probe-durable-postgres): the server's sweep is
	// drawn from them (ServerDurableCases).
	ServerDurable map[string][]DurableCall `json:"serverDurable,omitempty"`
}

// StoreMatrix returns every store window x every store fault kind, built
// like the catalogue's windows (the fault worker must hit the point, a
// crash must end it by the kill, something must complete afterwards).
func (b Builder) StoreMatrix(ws []StoreWindow) []Case {
	var out []Case
	for _, w := range ws {
		for _, k := range faults.StoreKinds {
			c, _ := b.windowCase(w.Spec(), k)
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
			QuiesceStep(faults.Ingestion, "fault")}}
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
		Steps: []Step{{Worker: "fault", Actions: StandardScript(), Kill: &k}, QuiesceStep(faults.Ingestion, "fault")}}
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

// RandomKills returns n random-kill cases of a run seeded seed, drawn over
// what the probe measured.
func RandomKills(seed int64, n int, pr Probe) []Case {
	out := make([]Case, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, RandomKillCase(RandomKillSeed(seed, i), pr))
	}
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
	// no kind (sim.Runner.PowerLossSelection, TornByDefault). Tear is its
	// unit (0 or faults.TearSector for 512-byte sectors, a smaller power
	// of two down to faults.TearByte inside one sector, faults.TearPage
	// for pages).
	TornWrite bool
	Tear      int
	// Disk are the disk error columns (DiskMatrix), narrowed like the
	// rest: asked for by their kinds (Runner.PowerLossSelection).
	Disk []faults.Kind
}

// Cases returns the cases of a selection: the catalogue's matrix and case
// classes, the store windows of the probe, then the random kills (drawn
// over the probe's measured fault-free run, seeded by seed).
func (s Selection) Cases(pr Probe, lease Builder, seed int64) []Case {
	cases := Filter(append(lease.Matrix(), lease.StoreMatrix(pr.Windows)...), s.Points, s.Kinds, s.Classes)
	if s.PowerLoss {
		cases = append(cases, Filter(lease.PowerLossMatrix(pr.Windows), s.Points, s.Kinds, s.Classes)...)
	}
	if s.TornWrite {
		cases = append(cases, Filter(lease.TornWriteMatrix(pr.Windows, cmp.Or(s.Tear, defaultTear)), s.Points, s.Kinds, s.Classes)...)
	}
	for _, k := range s.Disk {
		cases = append(cases, Filter(lease.DiskMatrix(pr.Windows, k), s.Points, s.Kinds, s.Classes)...)
	}
	cases = append(cases, s.betweenCalls(lease.BetweenCallsCases(pr.StaleCalls))...)
	if s.PowerLoss {
		// The sweep needs the lazy mount the power-loss column runs on.
		cases = append(cases, s.durableSteps(DurableStepCases(pr.Durable))...)
		cases = append(cases, s.durableSteps(serverDurable(pr.ServerDurable))...)
	}
	cases = append(cases, s.durableDisk(pr.Durable)...)
	cases = append(cases, s.slowSyncTakeover(lease)...)
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
