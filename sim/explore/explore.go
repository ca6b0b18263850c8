// Package explore searches for invariant violations with random fault
// schedules (gopter generators), shrinks a violating schedule to a minimal
// one, and hands it back as a case that replays the violation.
//
// One seed decides everything: the i-th schedule of seed S is the same on
// every machine, so `--shard i/n` splits the search without overlap and a
// reported seed and index reproduce the schedule.
package explore

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/serviceproc"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/initial"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/leanovate/gopter"
)

// corpus is what generated schedules ingest: versions of documents that
// share entities and edges, so that registrations race, edges go stale and
// retractions meet shared support.
var corpus = []catalogue.Action{
	{Do: "ingest", Doc: "d1", Content: catalogue.DocD1v1},
	{Do: "ingest", Doc: "d1", Content: catalogue.DocD1v2},
	{Do: "ingest", Doc: "d2", Content: catalogue.DocD2},
	{Do: "ingest", Doc: "d3", Content: catalogue.DocD3a},
	{Do: "ingest", Doc: "d3", Content: catalogue.DocD3b},
	{Do: "ingest", Doc: "d4", Content: catalogue.DocD4},
	{Do: "retract", Doc: "d1"},
	{Do: "retract", Doc: "d2"},
}

// Shape bounds the generated schedules.
type Shape struct {
	MaxClients, MaxActions, MaxFaults int
	// PlanSave is the share (0..1) of System B schedules.
	PlanSave float64
	// LeaseTTL scales pause faults.
	LeaseTTLMillis int64
	// Servers, when set, are the servers a schedule may fault too: a
	// third of the armed faults become server faults (server-crash,
	// ack-lost, conn-reset) against one of them.
	Servers []string
	// NoCrash are servers of Servers that can only lose replies and
	// connections: no command to kill and start them was given.
	NoCrash []string
	// ServerHolds is the share (0..1) of server faults that become one of
	// the faults holding a worker's request past its lease (server-pause,
	// partition, clock-jump: faults.ServerOptInKinds) that Holds lists
	// for the server drawn; its worker runs in the background, and a
	// schedule has one such fault at most and then no other server fault
	// (server-pause and clock-jump act on the whole server).
	ServerHolds float64
	Holds       map[string][]faults.Kind
	// StoreWindows are the windows the store declared (sim.Runner.Probe):
	// clients arm them like the catalogue's.
	StoreWindows []catalogue.StoreWindow
	// RandomKill is the share (0..1) of client workers SIGKILLed at a
	// random instant of their run: before a store call or inside a write
	// commit drawn over KillCalls and KillCommits (the probe's counts,
	// sim.KillInstant), replayable and shrinkable; or, where no commit is
	// seen, every other one at a wall-clock offset drawn over KillBase
	// (the probe's measured fault-free run). Real processes only.
	RandomKill             float64
	KillBase               time.Duration
	KillCalls, KillCommits int
	// PowerLoss is the share (0..1) of armed crashes that become power
	// losses (faults.PowerLoss): real processes on a runner that can cut
	// the power only (sim.Runner.PowerLossUntested).
	PowerLoss float64
	// TornWrite is the share (0..1) of those power losses that tear
	// (faults.TornWrite) instead of losing every un-synced write, at Tear
	// (faults.TearSector: 512-byte sectors; a smaller power of two down to
	// faults.TearByte: inside one sector; 0 or faults.TearPage: 4 KiB
	// pages).
	TornWrite float64
	Tear      int
	// DiskErrors is the share (0..1) of armed crashes that become disk
	// errors instead (faults.DiskKinds, one drawn; at most one per
	// client): real processes on a runner that can cut the power only.
	DiskErrors float64
	// DurableKill is the share (0..1) of client workers without faults
	// killed right after a durable step inside a store call that the
	// probe saw take two or more (DurableCalls, sim.Probe's Durable; on
	// a lazy mount only), the power cut then too a PowerLoss share of
	// the time (durable.go).
	DurableKill  float64
	DurableCalls []catalogue.DurableCall
	// CanArm, when set, says whether a fault of kind k may be armed at
	// window p (a service's declarations, ForService): schedules draw
	// only the windows and kinds it allows, so none is left out.
	CanArm func(p faults.Point, k faults.Kind) bool
}

// ForService is shape for a run through the service protocol: schedules
// of a system the service does not implement are not drawn, and faults
// only at the windows (and of the kinds) it can run
// (sim.ServiceSpec.CanArm): a window it does not declare, a store-call
// or commit window it cannot have, a lease fault without the harness's
// clock and locks never make a schedule that would be left out. Without a
// service shape is returned as it is.
func ForService(shape Shape, svc *sim.ServiceSpec) Shape {
	if svc == nil {
		return shape
	}
	// A service implements one system or both: schedules of the other
	// would all be left out.
	switch ingest, plan := slices.Contains(svc.Declared.Systems, serviceproc.SystemIngestion), slices.Contains(svc.Declared.Systems, serviceproc.SystemPlanSave); {
	case !plan:
		shape.PlanSave = 0
	case !ingest:
		shape.PlanSave = 1
	}
	shape.CanArm = func(p faults.Point, k faults.Kind) bool { ok, _ := svc.CanArm(p, k); return ok }
	if !shape.CanArm(faults.StoreCall, faults.Crash) {
		shape.KillCalls = 0
	}
	if !shape.CanArm(faults.StoreCommit, faults.Crash) {
		shape.KillCommits = 0
	}
	return shape
}

// allowed keeps the windows of specs that shape.CanArm allows, each with
// the kinds it allows there (specs as they are without CanArm). A window
// whose schedule arms another one too (beforeMarkFailed, beforeDeadLetter)
// needs that one allowed as well.
func allowed(specs []faults.Spec, shape Shape) []faults.Spec {
	if shape.CanArm == nil {
		return specs
	}
	var out []faults.Spec
	for _, s := range specs {
		s.Kinds = slices.DeleteFunc(slices.Clone(s.Kinds), func(k faults.Kind) bool { return !shape.CanArm(s.Point, k) })
		switch {
		case len(s.Kinds) == 0,
			s.Point == faults.BeforeMarkFailed && !shape.CanArm(faults.BeforeGraphWrite, faults.Transient),
			s.Point == faults.BeforeDeadLetter && !shape.CanArm(faults.BeforeStateCommit, faults.Permanent):
			continue
		}
		out = append(out, s)
	}
	return out
}

// DefaultShape is small enough to shrink fast and rich enough to find the
// mutants.
var DefaultShape = Shape{MaxClients: 3, MaxActions: 3, MaxFaults: 2, PlanSave: 0.1, LeaseTTLMillis: 250}

// Gen is the gopter generator of fault schedules of the given shape.
func Gen(shape Shape) gopter.Gen {
	return func(p *gopter.GenParameters) *gopter.GenResult {
		return gopter.NewGenResult(build(p.Rng, shape), gopter.NoShrinker)
	}
}

// Schedule returns the index-th schedule of a seed (deterministic): what
// Gen draws from gopter's parameters seeded with seed*1_000_003+index,
// whose generator is math/rand's source of that seed. The source is
// reseeded rather than made anew (seeding one is most of its cost, and
// gopter's default parameters seed a second one from the clock first).
func Schedule(seed int64, index int, shape Shape) catalogue.Case {
	r := rngs.Get().(*rand.Rand)
	r.Seed(seed*1_000_003 + int64(index))
	c := build(r, shape)
	rngs.Put(r)
	c.ID = fmt.Sprintf("s%d-%d", seed, index)
	return c
}

var rngs = sync.Pool{New: func() any { return rand.New(rand.NewSource(0)) }}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.Intn(len(xs))] }

// clientPoints are the ingestion windows a client passes through;
// recoveryPoints adds those only recovery passes through, in the order
// schedules have always drawn them from.
var (
	clientPoints   = sync.OnceValue(func() []faults.Spec { return ingestionPoints(false) })
	recoveryPoints = sync.OnceValue(func() []faults.Spec { return append(ingestionPoints(true), ingestionPoints(false)...) })
)

func ingestionPoints(recovery bool) []faults.Spec {
	var out []faults.Spec
	for _, s := range faults.Catalogue {
		if s.System == faults.Ingestion && s.InRecovery == recovery {
			out = append(out, s)
		}
	}
	return out
}

// withStoreWindows adds the store's client-side windows to the catalogue's.
func withStoreWindows(points []faults.Spec, ws []catalogue.StoreWindow) []faults.Spec {
	out := slices.Clone(points)
	for _, w := range ws {
		if w.System == faults.Ingestion && !w.InRecovery {
			out = append(out, w.Spec())
		}
	}
	return out
}

func arm(r *rand.Rand, spec faults.Spec, shape Shape) faults.Action {
	if len(shape.Servers) > 0 && r.Float64() < 1.0/3 {
		srv, k := pick(r, shape.Servers), pick(r, faults.ServerKinds)
		if k == faults.ServerCrash && slices.Contains(shape.NoCrash, srv) {
			k = pick(r, []faults.Kind{faults.AckLost, faults.ConnReset})
		}
		// Drawn only when asked for, so that seeds without them keep the
		// schedules they always had.
		if hs := shape.Holds[srv]; shape.ServerHolds > 0 && len(hs) > 0 && r.Float64() < shape.ServerHolds {
			k = pick(r, hs)
		}
		if spec.AppliesServer(k, srv) {
			return faults.Action{Kind: k, Hit: 1, Server: srv}
		}
	}
	k := pick(r, spec.Kinds)
	hit := 1 + r.Intn(2)
	// Drawn only when asked for, so that seeds without power losses keep
	// the schedules they always had.
	if shape.PowerLoss > 0 && (k == faults.Crash || k == faults.Recrash) && r.Float64() < shape.PowerLoss {
		if shape.TornWrite > 0 && r.Float64() < shape.TornWrite {
			a := faults.On(faults.TornWrite, hit)
			a.Tear = faults.ActionTear(shape.Tear)
			return a
		}
		return faults.On(faults.PowerLoss, hit)
	}
	if shape.DiskErrors > 0 && (k == faults.Crash || k == faults.Recrash) && r.Float64() < shape.DiskErrors {
		return faults.On(pick(r, faults.DiskKinds), hit)
	}
	switch k {
	case faults.Pause:
		// Around the lease TTL (just before expiry, just after, half a
		// TTL after) or well past it.
		return faults.PauseOn(pick(r, catalogue.Lease(time.Duration(shape.LeaseTTLMillis)*time.Millisecond).LeasePauses()), hit)
	case faults.Recrash:
		k = faults.Crash
	case faults.Persistent:
		hit = 0 // every hit
	}
	return faults.On(k, hit)
}

func build(r *rand.Rand, shape Shape) catalogue.Case {
	if r.Float64() < shape.PlanSave {
		return buildPlanSave(r, shape)
	}
	c := catalogue.Case{System: faults.Ingestion, Class: "explored", Description: "a generated fault schedule"}
	clients := 1 + r.Intn(shape.MaxClients)
	var names []string
	persistent := faults.Arms{}
	for i := 0; i < clients; i++ {
		st := catalogue.Step{Worker: fmt.Sprintf("w%d", i+1), Arms: faults.Arms{}}
		for n := 1 + r.Intn(shape.MaxActions); n > 0; n-- {
			st.Actions = append(st.Actions, pick(r, corpus))
		}
		points := clientPoints()
		if len(shape.StoreWindows) > 0 {
			points = withStoreWindows(points, shape.StoreWindows)
		}
		points = allowed(points, shape)
		for n := r.Intn(shape.MaxFaults + 1); n > 0 && len(points) > 0; n-- {
			spec := pick(r, points)
			switch spec.Point {
			case faults.BeforeMarkFailed:
				st.Arms[faults.BeforeGraphWrite] = faults.On(faults.Transient, 1)
			case faults.BeforeDeadLetter:
				st.Arms[faults.BeforeStateCommit] = faults.On(faults.Permanent, 1)
			}
			a := arm(r, spec, shape)
			if a.Kind.IsDisk() && slices.ContainsFunc(slices.Collect(maps.Values(st.Arms)), func(b faults.Action) bool { return b.Kind.IsDisk() }) {
				a.Kind = faults.Crash // one disk error per worker
			}
			st.Arms[spec.Point] = a
			if a.Kind == faults.Pause || a.Kind.HoldsPastLease() {
				st.Background = true
			}
			if a.Kind == faults.Persistent {
				persistent[spec.Point] = a
			}
		}
		if len(st.Arms) == 0 {
			st.Arms = nil
		}
		// Drawn only when asked for, so that seeds without random kills
		// keep the schedules they always had.
		if shape.RandomKill > 0 && !st.Background && r.Float64() < shape.RandomKill {
			seed := r.Int63()
			if p, hit, ok := catalogue.KillInstant(seed, shape.KillCalls, shape.KillCommits); ok {
				if st.Arms == nil {
					st.Arms = faults.Arms{}
				}
				st.Arms[p] = faults.On(faults.Crash, hit)
			} else {
				st.Kill = &catalogue.RandomKill{Seed: seed, Offset: catalogue.KillOffset(seed, shape.KillBase), Base: shape.KillBase}
			}
		}
		names = append(names, st.Worker)
		c.Steps = append(c.Steps, st)
	}
	if r.Intn(2) == 0 {
		rec := catalogue.Step{Worker: "r1", Actions: []catalogue.Action{{Do: "recover", Rounds: 3}}, ContinueOnError: true}
		if points := allowed(recoveryPoints(), shape); r.Intn(2) == 0 && len(points) > 0 {
			spec := pick(r, points)
			a := arm(r, spec, shape)
			if a.Kind != faults.Pause && !a.Kind.HoldsPastLease() {
				rec.Arms = faults.Arms{spec.Point: a}
			}
		}
		// A persistent fault stays until faults stop: recovery meets it
		// too.
		for p, a := range persistent {
			if rec.Arms == nil {
				rec.Arms = faults.Arms{}
			}
			rec.Arms[p] = a
		}
		c.Steps = append(c.Steps, rec)
	}
	c.Steps = append(c.Steps, catalogue.Step{Worker: "quiesce", Actions: []catalogue.Action{{Do: "recover", Rounds: 10}}, Resubmit: names, ContinueOnError: true})
	stallBetweenCalls(r, &c, clients, shape)
	killAfterDurableSteps(r, &c, clients, shape)
	oneServerHold(&c)
	return c
}

// oneServerHold leaves a schedule with a fault that holds a request past
// the lease no other server fault: the first such fault stays, and every
// other server fault becomes a crash at its window.
func oneServerHold(c *catalogue.Case) {
	if !slices.ContainsFunc(c.Steps, func(st catalogue.Step) bool {
		return slices.ContainsFunc(slices.Collect(maps.Values(st.Arms)), func(a faults.Action) bool { return a.Kind.HoldsPastLease() })
	}) {
		return
	}
	held := false
	for i := range c.Steps {
		st := &c.Steps[i]
		for _, p := range slices.Sorted(maps.Keys(st.Arms)) {
			a := st.Arms[p]
			switch {
			case a.Kind.HoldsPastLease() && !held:
				held = true
			case a.Kind.IsServer():
				st.Arms[p] = faults.On(faults.Crash, a.Hit)
			}
		}
	}
}

func buildPlanSave(r *rand.Rand, shape Shape) catalogue.Case {
	c := catalogue.Case{System: faults.PlanSave, Class: "explored", Description: "a generated plan-save schedule"}
	var points []faults.Spec
	for _, s := range faults.Catalogue {
		if s.System == faults.PlanSave {
			points = append(points, s)
		}
	}
	st := catalogue.Step{Worker: "w1", Actions: catalogue.PlanSaveScript(), Arms: faults.Arms{}}
	if points = allowed(points, shape); len(points) > 0 {
		spec := pick(r, points)
		st.Arms[spec.Point] = faults.On(pick(r, spec.Kinds), 1)
	}
	c.Steps = []catalogue.Step{st,
		{Worker: "r1", Actions: []catalogue.Action{{Do: "plansave-invoke", Thread: "t1", Approve: true}}, ContinueOnError: true},
		{Worker: "quiesce", Actions: []catalogue.Action{{Do: "plansave-invoke", Thread: "t1", Approve: true}, {Do: "plansave-conflict", Thread: "t1"}}, ContinueOnError: true}}
	return c
}

// Size counts what a person reads in a schedule: every action and fault
// outside the final quiesce worker.
func Size(c catalogue.Case) int {
	n := 0
	for _, st := range c.Steps {
		if st.Worker == "quiesce" {
			continue
		}
		n += len(st.Actions) + len(st.Arms)
		if st.Kill != nil {
			n++
		}
		if st.Durable != nil {
			n++
		}
	}
	return n
}

// Lines counts the document lines a schedule ingests (outside the final
// quiesce worker, whose actions are resubmissions): shrinking removes
// lines that the violation does not need.
func Lines(c catalogue.Case) int {
	n := 0
	for _, st := range c.Steps {
		if st.Worker == "quiesce" {
			continue
		}
		for _, a := range st.Actions {
			n += len(contentLines(a.Content))
		}
	}
	return n
}

func contentLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// Describe says how big a schedule is as its scenario file shows it: the entries
// under steps: (one per worker, the final quiesce included), then the
// actions, faults and document lines in them.
func Describe(c catalogue.Case) string {
	actions, arms := 0, 0
	for _, st := range c.Steps {
		actions += len(st.Actions)
		arms += len(st.Arms)
		if st.Durable != nil {
			arms++ // a fault of its scenario file (point durableStep)
		}
	}
	return fmt.Sprintf("%d %s (%d %s, %d %s, %d document %s)", len(c.Steps), plural(len(c.Steps), "step", "steps"),
		actions, plural(actions, "action", "actions"), arms, plural(arms, "fault", "faults"), Lines(c), plural(Lines(c), "line", "lines"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Options configure an exploration.
type Options struct {
	Seed   int64
	Budget time.Duration
	// MaxSchedules stops after this many schedules (0: budget only).
	MaxSchedules int
	// Shard i of n: only schedules whose index % n == i.
	ShardIndex, ShardCount int
	// Skip passes over the shard's first Skip schedules (to go on where an
	// earlier run of the same seed stopped).
	Skip  int
	Shape Shape
	// Confirm is how many re-runs a shrink candidate must fail in, every
	// time, to be kept (a flaky shrink is rejected).
	Confirm int
	// Parallel schedules at once.
	Parallel int
	// Progress is called with the schedules run so far (may be nil).
	Progress func(run int)
	// Each, when set, is given each schedule's result as it comes.
	Each func(verdict.CaseResult)
	// Target, when set ("I2"), hunts for that invariant only: other
	// violations are counted but not reported.
	Target string
	// Initial, when set, is the state every schedule starts from
	// (ScheduleFrom).
	Initial *initial.State
}

// Finding is a violation and its shrunk reproduction.
type Finding struct {
	Seed      int64
	Index     int
	Invariant string
	Original  catalogue.Case
	Shrunk    catalogue.Case
	Result    verdict.CaseResult
	// ShrunkResult is a confirmation run of the shrunk case that broke
	// the invariant again (its violations and timeline go into the
	// written scenario).
	ShrunkResult verdict.CaseResult
	// Reproduced counts the confirmation re-runs of the shrunk case that
	// broke the invariant again.
	Reproduced, Reruns int
	FoundAfter         time.Duration
	ShrunkAfter        time.Duration
	ShrinkSteps        int
}

// Result is what an exploration did.
type Result struct {
	Schedules int
	Took      time.Duration
	Finding   *Finding
	// Skipped counts schedules whose run was undecided (a harness error).
	Skipped int
	// LeftOut counts schedules a service run through the service protocol
	// cannot run (sim.ServiceSpec.Applicable: a window it does not
	// declare, a lease fault without the harness's locks and clock): not
	// run, never passed.
	LeftOut int
	// Other counts schedules that broke an invariant other than Target.
	Other int
}

// Rate is schedules per second.
func (r Result) Rate() float64 { return float64(r.Schedules) / r.Took.Seconds() }

// Run explores until a violation is found (then shrinks it), the budget
// runs out or MaxSchedules have run.
func Run(ctx context.Context, runner *sim.Runner, o Options) Result {
	if o.ShardCount <= 0 {
		o.ShardCount = 1
	}
	if o.Confirm <= 0 {
		o.Confirm = 3
	}
	if o.Parallel <= 0 {
		o.Parallel = 2
	}
	if o.Shape.MaxClients == 0 {
		servers, noCrash := o.Shape.Servers, o.Shape.NoCrash
		o.Shape = DefaultShape
		o.Shape.Servers, o.Shape.NoCrash = servers, noCrash
	}
	o.Shape = ForService(o.Shape, runner.Config().Service)
	if !runner.WatchesDurableSteps() {
		// The probe's durable steps were counted on another runner (a
		// matrix run with processes, explored in-process).
		o.Shape.DurableKill = 0
	}
	start := time.Now()
	deadline := start.Add(o.Budget)
	var res Result
	type out struct {
		index int
		cr    verdict.CaseResult
	}
	// Parallel workers take schedule indices in order. Once a violation
	// shows, no new index is handed out and the ones under way finish: as
	// every index below the last one handed out has then run, the first
	// violating index is the same whatever the timing.
	var (
		mu      sync.Mutex
		idx     = o.ShardIndex + o.Skip*o.ShardCount
		issued  int
		stopped bool
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if stopped || ctx.Err() != nil || (o.Budget > 0 && !time.Now().Before(deadline)) || (o.MaxSchedules > 0 && issued >= o.MaxSchedules) {
			return 0, false
		}
		i := idx
		idx += o.ShardCount
		issued++
		return i, true
	}
	ch := make(chan out, o.Parallel)
	var wg sync.WaitGroup
	for w := 0; w < o.Parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, ok := take()
				if !ok {
					return
				}
				c := o.schedule(i)
				// ForService draws no schedule the service cannot run:
				// one that still could not is left out, never passed.
				if svc := runner.Config().Service; svc != nil {
					if ok, why := svc.Applicable(c); !ok {
						ch <- out{i, verdict.CaseResult{Case: c, Verdict: verdict.NotApplicable, Notes: []string{why}}}
						continue
					}
				}
				ch <- out{i, runner.RunCase(ctx, c)}
			}
		}()
	}
	go func() { wg.Wait(); close(ch) }()
	var found []out
	for x := range ch {
		res.Schedules++
		switch x.cr.Verdict {
		case verdict.Fail:
			if o.Target == "" || slices.Contains(x.cr.Broken(), o.Target) {
				found = append(found, x)
				mu.Lock()
				stopped = true
				mu.Unlock()
			} else {
				res.Other++
			}
		case verdict.Undecided:
			res.Skipped++
		case verdict.NotApplicable:
			res.LeftOut++
		}
		if o.Each != nil {
			o.Each(x.cr)
		}
		if o.Progress != nil {
			o.Progress(res.Schedules)
		}
	}
	if len(found) > 0 {
		sort.Slice(found, func(i, j int) bool { return found[i].index < found[j].index })
		f := found[0]
		inv := f.cr.Broken()[0]
		if o.Target != "" {
			inv = o.Target
		}
		fd := &Finding{Seed: o.Seed, Index: f.index, Invariant: inv, Original: f.cr.Case, Result: f.cr, FoundAfter: time.Since(start)}
		fd.shrink(ctx, runner, o.Confirm, start)
		res.Finding = fd
	}
	res.Took = time.Since(start)
	return res
}

// shrink shrinks the finding's original case and confirms the shrunk one
// in 10 re-runs.
func (fd *Finding) shrink(ctx context.Context, runner *sim.Runner, confirm int, start time.Time) {
	fd.Shrunk, fd.ShrinkSteps = Shrink(ctx, runner, fd.Original, fd.Invariant, confirm)
	fd.Reruns = 10
	for i := 0; i < fd.Reruns; i++ {
		if cr := runner.RunCase(ctx, fd.Shrunk); slices.Contains(cr.Broken(), fd.Invariant) {
			fd.Reproduced++
			fd.ShrunkResult = cr
		}
	}
	fd.ShrunkAfter = time.Since(start)
}

// ShrinkCase runs a given schedule (a scenario's, such as a random kill's
// finding) and, when it breaks target (any invariant when ""), shrinks it as
// Run shrinks what it finds. The result's Finding is nil when the schedule
// broke nothing; Skipped or Other count a run that was undecided or broke
// another invariant.
func ShrinkCase(ctx context.Context, runner *sim.Runner, c catalogue.Case, target string, confirm int) Result {
	if confirm <= 0 {
		confirm = 3
	}
	start := time.Now()
	res := Result{Schedules: 1}
	cr := runner.RunCase(ctx, c)
	switch {
	case cr.Verdict == verdict.Undecided:
		res.Skipped++
	case cr.Verdict == verdict.Fail && (target == "" || slices.Contains(cr.Broken(), target)):
		inv := cmp.Or(target, cr.Broken()[0])
		fd := &Finding{Invariant: inv, Original: c, Result: cr, FoundAfter: time.Since(start)}
		fd.shrink(ctx, runner, confirm, start)
		res.Finding = fd
	case cr.Verdict == verdict.Fail:
		res.Other++
	}
	res.Took = time.Since(start)
	return res
}

// Shrink makes a violating case smaller while it still breaks invariant in
// every one of confirm re-runs: it drops client workers, the recovery
// worker, actions and faults, and simplifies faults, until nothing more can
// go. It returns the smallest case and how many reductions it kept.
func Shrink(ctx context.Context, runner *sim.Runner, c catalogue.Case, invariant string, confirm int) (catalogue.Case, int) {
	var last history.Log // the timeline of the case kept last (kill anchors shift by it)
	breaks := func(cand catalogue.Case) bool {
		var h history.Log
		for i := 0; i < confirm; i++ {
			if ctx.Err() != nil {
				return false
			}
			cr := runner.RunCase(ctx, cand)
			if !slices.Contains(cr.Broken(), invariant) {
				return false
			}
			h = cr.Timeline
		}
		last = h
		return true
	}
	if _, _, _, anchored := catalogue.AnchoredKill(c); anchored {
		// What each action took of calls and commits, for shiftedKills.
		if cr := runner.RunCase(ctx, c); slices.Contains(cr.Broken(), invariant) {
			last = cr.Timeline
		}
	}
	kept := 0
	for progress := true; progress && ctx.Err() == nil; {
		progress = false
		for _, cand := range append(candidates(c), shiftedKills(c, last)...) {
			if Size(cand) >= Size(c) && !simpler(cand, c) && Lines(cand) >= Lines(c) {
				continue
			}
			if breaks(cand) {
				c, progress = cand, true
				kept++
				break
			}
		}
	}
	c.Description = fmt.Sprintf("shrunk from a generated schedule; breaks %s", invariant)
	return c, kept
}

// simpler reports whether a has fewer or plainer faults than b at the same
// size (hit 1, crash).
func simpler(a, b catalogue.Case) bool {
	score := func(c catalogue.Case) int {
		n := 0
		for _, st := range c.Steps {
			for _, act := range st.Arms {
				if act.Hit > 1 {
					n++
				}
				if act.Kind != faults.Crash {
					n++
				}
			}
			n += durableScore(st.Durable)
		}
		return n
	}
	return score(a) < score(b)
}

func clone(c catalogue.Case) catalogue.Case {
	out := c
	out.Steps = make([]catalogue.Step, len(c.Steps))
	for i, st := range c.Steps {
		st.Actions = append([]catalogue.Action(nil), st.Actions...)
		st.Resubmit = append([]string(nil), st.Resubmit...)
		st.ExpectHit = append([]faults.Point(nil), st.ExpectHit...)
		if st.Durable != nil {
			k := *st.Durable
			st.Durable = &k
		}
		if st.Arms != nil {
			m := make(faults.Arms, len(st.Arms))
			for k, v := range st.Arms {
				m[k] = v
			}
			st.Arms = m
		}
		out.Steps[i] = st
	}
	return out
}

func sortedPoints(m faults.Arms) []faults.Point {
	out := make([]faults.Point, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// candidates lists one-step reductions of c, biggest first; a document's
// lines go last, one at a time.
func candidates(c catalogue.Case) []catalogue.Case {
	var out []catalogue.Case
	for i, st := range c.Steps {
		if st.Worker == "quiesce" {
			continue
		}
		// drop a whole worker
		d := clone(c)
		d.Steps = append(d.Steps[:i:i], d.Steps[i+1:]...)
		for j := range d.Steps {
			d.Steps[j].Resubmit = slices.DeleteFunc(d.Steps[j].Resubmit, func(w string) bool { return w == st.Worker })
		}
		out = append(out, d)
	}
	for i, st := range c.Steps {
		if st.Worker == "quiesce" {
			continue
		}
		for j := range st.Actions {
			if len(st.Actions) == 1 {
				break
			}
			d := clone(c)
			d.Steps[i].Actions = slices.Delete(d.Steps[i].Actions, j, j+1)
			out = append(out, d)
		}
		if st.Kill != nil {
			d := clone(c)
			d.Steps[i].Kill = nil
			out = append(out, d)
		}
		out = append(out, durableCandidates(c, i)...)
		for _, p := range sortedPoints(st.Arms) {
			d := clone(c)
			delete(d.Steps[i].Arms, p)
			if len(d.Steps[i].Arms) == 0 {
				d.Steps[i].Arms = nil
			}
			fixBackground(&d.Steps[i])
			out = append(out, d)
			act := st.Arms[p]
			if act.Hit > 1 {
				d := clone(c)
				act2 := act
				act2.Hit = 1
				d.Steps[i].Arms[p] = act2
				out = append(out, d)
			}
			if act.Kind != faults.Crash {
				if spec, ok := faults.Lookup(p); (ok && spec.Applies(faults.Crash)) || faults.IsStorePoint(p) {
					d := clone(c)
					d.Steps[i].Arms[p] = faults.On(faults.Crash, act.Hit)
					fixBackground(&d.Steps[i])
					out = append(out, d)
				}
			}
		}
	}
	for i, st := range c.Steps {
		if st.Worker == "quiesce" {
			continue
		}
		for j, a := range st.Actions {
			lines := contentLines(a.Content)
			if len(lines) < 2 {
				continue
			}
			for k := range lines {
				d := clone(c)
				d.Steps[i].Actions[j].Content = strings.Join(slices.Delete(slices.Clone(lines), k, k+1), "\n") + "\n"
				out = append(out, d)
			}
		}
	}
	return out
}

// fixBackground keeps a step in the background exactly when it has a pause
// fault (a paused worker must overlap the next one).
func fixBackground(st *catalogue.Step) {
	st.Background = false
	for _, v := range st.Arms {
		if v.Kind == faults.Pause {
			st.Background = true
		}
	}
}
