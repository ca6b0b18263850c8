package sim

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/casefaults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/execmode"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/crashmatrix/crashmatrix/sim/worker"
)

// Config configures a Runner.
type Config struct {
	// Backend names the backend; workers resolve it by name.
	Backend BackendSpec
	// Use, when set, is the backend itself (a user's stores certified from
	// their own test binary, whose re-executed workers hold the same
	// value); Backend is then only its name.
	Use *Backend
	// SimulatedStore admits a Backend marked Simulated (explore
	// --sim-store); any other run refuses one, so that a model of a store
	// never stands in for a real one in certification.
	SimulatedStore bool
	Launcher       Launcher
	// WorkDir holds one folder per case (history, specs, embedded data).
	WorkDir string
	// LeaseTTL and ClaimTTL (defaults 250ms and 300ms) bound how long a
	// killed worker blocks its document and claims.
	LeaseTTL, ClaimTTL time.Duration
	// BatchSize of graph writes (default 2: the standard corpus then
	// writes in three batches).
	BatchSize int
	// ProcessTimeout kills a hung worker (default 30s; ServerWorkerDeadline
	// for a server backend with adaptive timings).
	ProcessTimeout time.Duration
	// Bugs are service mutants; Mutant a backend mutant.
	Bugs   []reference.Bug
	Mutant string
	// Seed decides jitter and (for exploration) the schedule.
	Seed int64
	// Namespace prefixes every case's namespace (unique per run).
	Namespace string
	// InProcess runs workers as goroutines: a crash abandons the worker
	// (its goroutine parks forever, nothing deferred runs) and the stores
	// are reopened as the backend's durability provides; time is
	// simulated. Fast, and deterministic.
	InProcess bool
	// InProcessFiles keeps an embedded backend's data in files in the
	// in-process mode too (by default it lives in memory there).
	InProcessFiles bool
	// LazyData puts every case's data directory on a lazy file system
	// (faults/lazyfs), as a power-loss case's is, whether or not the case
	// cuts the power: what the lazy file system costs by itself (bench).
	// Process mode, embedded backends, where FUSE works.
	LazyData bool
	// ServerFaults, when set, lets cases fault the backend's servers
	// (server-crash, ack-lost, conn-reset); process mode only.
	ServerFaults ServerFaults
	// Adaptive lets a process-mode run derive its timings from what it
	// measures: RunAll calibrates step latency before the cases (LeaseTTL
	// is then a floor), raises the TTL when a case's steps come close to
	// it, and retries a case not exercised for lack of time with a longer
	// TTL. Off, LeaseTTL is used as given.
	Adaptive bool
	// WallClock has process workers take lease, claim and backoff time
	// from the wall clock, as a deployed service does. Off (the default),
	// they share the case's harness clock (sim/worker/clock.go): time moves only
	// when a worker sleeps or stalls, so the verdicts do not depend on the
	// machine's load, a pause past a lease costs nothing, and Adaptive has
	// nothing to adapt.
	WallClock bool
	// Service, when set, runs the workers' intents on a service of the
	// user's through the service protocol (docs/service-protocol.md)
	// instead of the reference; the backend holds the stores it takes
	// from the harness. Worker processes only.
	Service *ServiceSpec
	// RecoverWith or RecoverUse, when set, is another build of the store
	// (version B): from the first worker of a case that dies by a kill
	// on, every worker and every snapshot opens it instead of the run's
	// backend, on the data the run's backend left (sim/upgrade.go).
	// RecoverUse is the backend itself (a Go test's, whose re-executed
	// workers hold it too, see WorkerBackend); RecoverWith names it for
	// worker processes that resolve it (store-cmd). RecoverLabel is what
	// reports call it. Process mode only.
	RecoverWith  *BackendSpec
	RecoverUse   *Backend
	RecoverLabel string
	// FailFast stops RunAll from starting cases once one has failed (a
	// broken invariant): the cases under way finish, the rest are
	// undecided, never run (NotRunFailFast). For a run that only asks
	// whether anything breaks, such as a mutant's.
	FailFast bool
}

// Runner runs cases with real worker processes.
type Runner struct {
	cfg     Config
	backend Backend
	// modes starts the cases' workers (sim/execmode): it knows the
	// worker processes running and the in-process mode's shared handles.
	modes *execmode.Modes
	runs  atomic.Int64
	// outside carries out the faults outside a worker (sim/casefaults).
	outside *casefaults.Faults
	// timing is the live timing (see Timing); claimFixed says the
	// caller set ClaimTTL, which then scales with the lease TTL.
	timing     adaptive
	claimFixed bool
	// recover is version B of an upgrade run (Config.RecoverWith), nil
	// without one.
	recover *recovery
	// killBase is the shortest fault-free span a random kill's worker was
	// seen to take (nanoseconds; 0: none yet), see rescaleKills.
	killBase atomic.Int64
	// serviceRetries counts, per case, the snapshots whose service reader
	// was started once more (noteServiceRetry).
	serviceRetries struct {
		sync.Mutex
		n map[string]int
	}
}

// NewRunner resolves the backend and fills in defaults.
func NewRunner(cfg Config) (*Runner, error) {
	for _, d := range []struct {
		name string
		ttl  time.Duration
	}{{"lease TTL", cfg.LeaseTTL}, {"claim TTL", cfg.ClaimTTL}} {
		// The workers get them in whole milliseconds (WorkerSpec): a
		// sub-millisecond part would be lost, and under 1ms the service
		// would fall back to its own default, which the checker does not
		// judge by.
		if d.ttl < 0 || d.ttl%time.Millisecond != 0 {
			return nil, fmt.Errorf("%s %s: want a whole number of milliseconds, at least 1ms (0 for the default)", d.name, d.ttl)
		}
	}
	var b Backend
	if cfg.Use != nil {
		b = *cfg.Use
		if cfg.Backend.Name == "" {
			cfg.Backend.Name = b.Name
		}
	} else {
		var err error
		if b, err = ResolveBackend(cfg.Backend); err != nil {
			return nil, err
		}
	}
	if b.Simulated && !cfg.SimulatedStore {
		return nil, fmt.Errorf("backend %s is a simulated store, not a real one: only explore --sim-store runs on it, never a certification", b.Name)
	}
	if b.Simulated && !cfg.InProcess {
		return nil, fmt.Errorf("backend %s is a simulated store that lives in this process: it needs the in-process mode", b.Name)
	}
	if cfg.Service != nil {
		if err := prepareService(&cfg, &b); err != nil {
			return nil, err
		}
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = 250 * time.Millisecond
	}
	claimFixed := cfg.ClaimTTL > 0
	if !claimFixed {
		cfg.ClaimTTL = cfg.LeaseTTL + 50*time.Millisecond
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 2
	}
	if cfg.ProcessTimeout <= 0 {
		cfg.ProcessTimeout = 30 * time.Second
		if cfg.Adaptive && !cfg.InProcess && b.ServerBacked() {
			// A database server under load can stall for minutes and then
			// go on (seen: Neo4j answered nothing for 100-160 s on this
			// 2-core machine with two CPU-bound processes running, while
			// the lease TTL was still 1.8 s): a worker waiting on it is
			// slow, not hung, and killing it would turn a correct store's
			// verdict into "undecided".
			cfg.ProcessTimeout = ServerWorkerDeadline
		}
	}
	if cfg.Namespace == "" {
		cfg.Namespace = RunNamespace()
	}
	if !cfg.InProcess {
		casefaults.NoteStaleMounts()
	}
	src := "fixed"
	switch {
	case cfg.InProcess:
		src = "simulated"
	case !cfg.WallClock:
		src = "harness clock"
		cfg.Adaptive = false // step latency does not move this clock
	case cfg.Adaptive:
		src = "default"
	}
	if l, ok := cfg.Launcher.(BinaryLauncher); ok && l.Backend == "" {
		l.Backend = cfg.Backend.Name
		cfg.Launcher = l
	}
	rec, err := resolveRecovery(cfg, b)
	if err != nil {
		return nil, err
	}
	if rec != nil && rec.backend.ChildProcesses {
		// Killing a worker sweeps its session when either build starts
		// store processes.
		b.ChildProcesses = true
	}
	r := &Runner{cfg: cfg, backend: b, claimFixed: claimFixed, recover: rec}
	r.timing.t = catalogue.Timing{LeaseTTL: cfg.LeaseTTL, ClaimTTL: cfg.ClaimTTL, ProcessTimeout: cfg.ProcessTimeout, Source: src}
	r.modes = execmode.New(r.execRun())
	r.outside = casefaults.New(r.faultsRun())
	return r, nil
}

// faultsRun is what the faults outside a worker need of the runner.
func (r *Runner) faultsRun() casefaults.Run {
	return casefaults.Run{Backend: r.backend, InProcess: r.cfg.InProcess, LazyData: r.cfg.LazyData, WallClock: r.cfg.WallClock,
		ServerFaults: r.cfg.ServerFaults, LeaseTTL: func() time.Duration { return r.Timing().LeaseTTL },
		Snapshot: r.snapshot, Observe: Observe}
}

// execRun is what the modes that run the workers need of the runner.
func (r *Runner) execRun() execmode.Run {
	return execmode.Run{Backend: r.backend, Launcher: r.cfg.Launcher, WorkDir: r.cfg.WorkDir, InProcessFiles: r.cfg.InProcessFiles,
		StepBackend: r.stepBackend, ProcessTimeout: func() time.Duration { return r.Timing().ProcessTimeout },
		Snapshot: r.snapshot, Observe: Observe}
}

// ServerWorkerDeadline is the least deadline of a worker on a server
// backend when the timings adapt to the machine.
const ServerWorkerDeadline = 5 * time.Minute

// Backend returns the resolved backend.
func (r *Runner) Backend() Backend { return r.backend }

// Config returns the effective configuration.
func (r *Runner) Config() Config { return r.cfg }

// KillAll kills every worker process still running (Ctrl-C).
func (r *Runner) KillAll() { r.modes.KillAll() }

// CloseShared closes the in-process mode's shared handles, and what the
// backend holds across cases (Backend.Close: store-cmd's pooled store
// processes), of both builds in an upgrade run. The runner stays usable.
func (r *Runner) CloseShared() {
	r.modes.CloseShared()
	if r.recover != nil && r.recover.backend.Close != nil {
		_ = r.recover.backend.Close() // version B's pooled snapshot processes (sim/upgrade.go)
	}
}

// RunCase runs one case: its workers in order (processes, or goroutines in
// the in-process mode), then the checks, with the runner's current timing
// (pause lengths rescaled to its lease TTL). A case whose steps outran a
// fixed wall-clock TTL is undecided (outranTTL).
func (r *Runner) RunCase(ctx context.Context, c catalogue.Case) verdict.CaseResult {
	tm := r.Timing()
	return r.outranTTL(r.runCase(ctx, c.ForTTL(tm.LeaseTTL), tm), tm)
}

func (r *Runner) runCase(ctx context.Context, c catalogue.Case, tm catalogue.Timing) verdict.CaseResult {
	start := time.Now()
	dir := filepath.Join(r.cfg.WorkDir, c.ID)
	if c.System == faults.PlanSave && r.backend.OpenPlanSave == nil {
		return verdict.CaseResult{Case: c, Verdict: verdict.NotApplicable, Notes: []string{fmt.Sprintf(
			"backend %s does not provide System B's stores (the checkpoints and plans of the plan-save workflow: --plansave-cmd beside --store-cmd, Backend.OpenPlanSave in Go): the plan-save case is not applicable", r.backend.Name)}}
	}
	if r.cfg.Service != nil {
		if ok, why := r.cfg.Service.Implements(c.System); !ok {
			return verdict.CaseResult{Case: c, Verdict: verdict.NotApplicable, Notes: []string{why + ": the " + string(c.System) + " case is not applicable"}}
		}
	}
	c = r.rescaleKills(c)
	res := verdict.CaseResult{Case: c, Hits: map[string]int{}, Dir: dir, LeaseTTL: tm.LeaseTTL}
	fail := func(v verdict.Verdict, note string) verdict.CaseResult {
		res.Verdict = v
		res.Notes = append(res.Notes, note)
		res.Took = time.Since(start)
		return res
	}
	// Every run of a case gets a fresh space: stores shared between cases
	// (a server, or the in-process mode's one handle) keep earlier runs.
	space := fmt.Sprintf("%s-%s-%d", r.cfg.Namespace, c.ID, r.runs.Add(1))
	res.Space = space
	env := CaseEnv{Dir: filepath.Join(dir, "data"), Logs: filepath.Join(dir, verdict.CaseLogs), TempDir: filepath.Join(r.cfg.WorkDir, storeTempDir), Namespace: space, Mutant: r.cfg.Mutant}
	var cx execmode.Case
	var err error
	if r.cfg.InProcess {
		res.Dir = ""
		cx, err = r.modes.NewInProcessCase(ctx, env)
	} else {
		cx, err = r.modes.NewProcessCase(dir)
		if err == nil && !r.cfg.WallClock {
			err = worker.CreateClock(filepath.Join(dir, worker.ClockFile), time.Now().UnixMilli())
		}
	}
	if err != nil {
		return fail(verdict.Undecided, err.Error())
	}
	defer cx.Close()
	cs, unlock, err := r.outside.OpenServers(ctx, c, cx, &env, space, filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return fail(verdict.Undecided, err.Error())
	}
	defer unlock()
	if err := r.loadInitial(ctx, c, cx, env, space, dir); err != nil {
		return fail(verdict.Undecided, "initial state: "+err.Error())
	}
	pc, err := r.outside.MountPower(c, dir, &env)
	if err != nil {
		return fail(verdict.Undecided, err.Error())
	}
	defer pc.Close()
	var paused []execmode.Worker
	// A case that ends early (interrupted, or undecided on an error) with
	// a worker still paused kills it and returns once it has ended: a
	// paused worker would otherwise wait for a release until its deadline,
	// or outlive the run. (Every other worker has been waited for.)
	defer func() {
		if r.cfg.InProcess {
			return
		}
		for _, w := range paused {
			w.Kill()
			w.Wait()
		}
	}()
	var durableMiss *verdict.NotExercisedReason
	// The disk errors of background workers end with them (diskfaults.go).
	var bgDisks []*casefaults.Disk
	var diskErr error
	releasePaused := func() {
		for _, w := range paused {
			w.Release()
			res.Workers = append(res.Workers, w.Wait())
		}
		paused = nil
		diskErr = cmp.Or(diskErr, r.outside.EndDisks(ctx, pc, c, env, space, cx, bgDisks, &res))
		bgDisks = nil
	}
	for i, st := range c.Steps {
		if err := ctx.Err(); err != nil {
			return fail(verdict.Undecided, "interrupted: "+err.Error())
		}
		if i == len(c.Steps)-1 {
			// Faults stop, and every worker is done, before the final
			// recovery: nothing may act after it.
			releasePaused()
			if cs != nil {
				cs.StopFaults()
			}
		}
		acts := st.Actions
		if len(st.Resubmit) > 0 {
			h, err := cx.History()
			if err != nil {
				return fail(verdict.Undecided, err.Error())
			}
			var re []catalogue.Action
			for _, w := range st.Resubmit {
				re = append(re, unfinished(h, w, stepActions(c, w))...)
			}
			acts = append(re, acts...)
		}
		spec := WorkerSpec{Case: c.ID, Worker: st.Worker, Phase: i, Space: space, Backend: r.cfg.Backend, Env: env,
			History: filepath.Join(dir, "history.jsonl"), CallDir: filepath.Join(dir, "calls"), Actions: acts, Arms: st.Arms, Bugs: r.cfg.Bugs,
			LeaseTTLMillis: tm.LeaseTTL.Milliseconds(), ClaimTTLMillis: tm.ClaimTTL.Milliseconds(),
			BatchSize: r.cfg.BatchSize, Seed: r.cfg.Seed, ContinueOnError: st.ContinueOnError,
			Background: st.Background, StoppedFile: filepath.Join(dir, StoppedHoldersFile), Service: r.cfg.Service}
		if r.upgrade(&spec, res.Workers) && res.UpgradedAt == "" {
			res.UpgradedAt = st.Worker
		}
		if err := casefaults.OwnEndpoints(cs, st, &spec); err != nil {
			return fail(verdict.Undecided, "server faults: "+err.Error())
		}
		if st.Kill != nil {
			spec.KillAfterMicros = max(st.Kill.Offset.Microseconds(), 1)
			if st.Kill.After != "" {
				spec.KillAfterMicros = 0
				spec.KillAnchor, spec.KillAnchorIndex, spec.KillDeltaMicros = st.Kill.After, st.Kill.AfterIndex, st.Kill.Delta.Microseconds()
			}
		}
		if st.Background {
			spec.ReleaseFile = ReleaseFile(spec.History, i)
		}
		if !r.cfg.InProcess && !r.cfg.WallClock {
			spec.ClockFile = filepath.Join(dir, worker.ClockFile)
		}
		dw, unwatch, err := r.outside.WatchDurable(ctx, pc, st, dir, &spec)
		if err != nil {
			return fail(verdict.Undecided, err.Error())
		}
		disk, err := r.outside.WatchDisk(pc, st, dw, dir, &spec)
		if err != nil {
			unwatch()
			return fail(verdict.Undecided, err.Error())
		}
		w, err := cx.Start(ctx, spec, tm.ProcessTimeout)
		if err != nil {
			unwatch()
			return fail(verdict.Undecided, fmt.Sprintf("start worker %s: %v", st.Worker, err))
		}
		if st.Background {
			// Move on once the worker reports a hit (it is now paused or
			// dead) or exits; a paused worker resumes when the next
			// foreground worker is done, so the interleaving is the same
			// on every run.
			w.WaitHitOrExit(ctx, tm.ProcessTimeout)
			paused = append(paused, w)
			if disk != nil {
				bgDisks = append(bgDisks, disk)
			}
			continue
		}
		res.Workers = append(res.Workers, w.Wait())
		unwatch()
		if dw != nil {
			res.DurableCalls = dw.Calls()
			if dw.Kill().Kills() {
				note, why := dw.Judge(st.Worker, res.Workers[len(res.Workers)-1].Exit)
				res.Notes = append(res.Notes, note)
				durableMiss = cmp.Or(durableMiss, why)
				if why == nil {
					// The kill is the case's fault: the report counts it as a hit.
					res.Hits[catalogue.DurableStepName(dw.Kill())]++
					if err := r.outside.DurablePower(ctx, pc, c, env, space, cx, st.Worker, dw, &res); err != nil {
						return fail(verdict.Undecided, err.Error())
					}
				}
			}
		}
		if paused, err = r.outside.AfterDisk(ctx, pc, c, env, space, cx, disk, paused, &res); err != nil {
			return fail(verdict.Undecided, err.Error())
		}
		if paused, err = r.outside.AfterWorker(ctx, pc, c, env, space, cx, paused, &res); err != nil {
			return fail(verdict.Undecided, err.Error())
		}
		releasePaused()
		if diskErr != nil {
			return fail(verdict.Undecided, diskErr.Error())
		}
	}
	releasePaused()
	if diskErr != nil {
		return fail(verdict.Undecided, diskErr.Error())
	}
	h, err := cx.History()
	if err != nil {
		return fail(verdict.Undecided, err.Error())
	}
	res.Timeline = h
	for i := range res.Workers {
		w := &res.Workers[i]
		for _, rec := range h {
			if rec.Kind == history.Hit && rec.Worker == w.Worker {
				w.Hits = append(w.Hits, string(rec.Point)+"="+rec.Fault.String())
			}
		}
		if w.Exit == "timeout" {
			note := fmt.Sprintf("worker %s (pid %d) hung and was killed after %s", w.Worker, w.PID, w.Took.Round(time.Second))
			if len(w.Stuck) > 0 {
				note += fmt.Sprintf(", stuck in %s (stacks: %s)", strings.Join(w.Stuck, "; "), w.Output)
			}
			if slices.ContainsFunc(w.Stuck, func(s string) bool { return strings.HasPrefix(s, execmode.SyncStall) }) {
				note += fmt.Sprintf("; the disk under the case data (%s) took longer than the worker deadline to sync: run on a less busy disk or on tmpfs (--workdir)", dir)
			}
			res.Notes = append(res.Notes, note)
		}
	}
	// Only a worker process can hang past a deadline (sim/execmode/process.go
	// writes the file): the in-process mode has no case folder to read.
	if !r.cfg.InProcess {
		if b, err := os.ReadFile(filepath.Join(dir, execmode.ServersAtDeadline)); err == nil {
			first, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
			res.Notes = append(res.Notes, fmt.Sprintf("servers at the deadline: %s (%s)", first, filepath.Join(dir, execmode.ServersAtDeadline)))
		}
	}
	for _, rec := range h {
		if rec.Kind == history.Hit {
			res.Hits[string(rec.Point)]++
		}
	}
	// Was every expected fault exercised, and did each armed crash end its
	// worker by the kill?
	var miss *verdict.NotExercisedReason
	noRecrash := verdict.RecrashWithoutReturn(c, h)
	for i, st := range c.Steps {
		for _, p := range st.ExpectHit {
			if !h.HitBy(st.Worker, p) && !(noRecrash && st.Worker == catalogue.RecrashWorker) {
				why := verdict.WhyNotHit(h, i, st, p, findWorker(res.Workers, st.Worker), tm)
				// The note keeps the reports' wording; the reason, with
				// its cause and advice, is in NotExercised.
				res.Notes = append(res.Notes, fmt.Sprintf("failpoint %s never fired in worker %s", p, st.Worker))
				miss = cmp.Or(miss, &why)
			}
		}
		for p, a := range st.Arms {
			if a.Kind.IsServer() && h.HitBy(st.Worker, p) && !casefaults.ServerFaultDone(h, st.Worker, p) {
				note := fmt.Sprintf("worker %s hit %s (%s) but the server fault never took effect", st.Worker, p, a)
				res.Notes = append(res.Notes, note)
				miss = cmp.Or(miss, &verdict.NotExercisedReason{Cause: verdict.CauseServerFault, Detail: note,
					Advice: "the armed fault found no matching traffic before faults stopped (ack-lost waits for a committed write's reply, conn-reset for a request), or the supervisor could not restart the server: see the case's server records"})
			}
			if (a.Kind == faults.Crash || a.Kind == faults.Unknown || a.Kind == faults.Recrash || a.Kind.IsPowerLoss()) && h.HitBy(st.Worker, p) {
				if wr := findWorker(res.Workers, st.Worker); wr != nil && !strings.HasPrefix(wr.Exit, "killed") {
					note := fmt.Sprintf("worker %s hit %s (%s) but exited %q instead of dying by SIGKILL", st.Worker, p, a, wr.Exit)
					res.Notes = append(res.Notes, note)
					miss = cmp.Or(miss, &verdict.NotExercisedReason{Cause: verdict.CauseNotKilled, Detail: note,
						Advice: "the crash did not end the worker: check the worker's Crash function (it must not return) and that nothing catches the kill"})
				}
			}
		}
	}
	r.learnKillBase(c, h)
	res.Case = anchorKills(res.Case, h)
	if notes, ok := killNotes(c, h); len(notes) > 0 {
		res.Notes = append(res.Notes, notes...)
		if !ok {
			miss = cmp.Or(miss, &verdict.NotExercisedReason{Cause: verdict.CauseKillMissed, Detail: strings.Join(notes, "; "),
				Advice: "the worker finished before its random kill (this run was faster than the measured one): run again, or pick another seed"})
		}
	}
	miss = cmp.Or(miss, durableMiss, pc.WithoutEffect())
	if miss == nil {
		miss = verdict.InterleavingMissed(c, h, tm)
	}
	exercised := miss == nil
	for _, w := range res.Workers {
		if w.Exit == "timeout" || strings.HasPrefix(w.Exit, "error") {
			return fail(verdict.Undecided, fmt.Sprintf("worker %s: %s", w.Worker, w.Exit))
		}
	}
	// Check the invariants against the stores' real contents.
	if env, err = pc.Settle(env); err != nil {
		return fail(verdict.Undecided, "power loss: "+err.Error())
	}
	snap, obs, err := cx.Snapshot(ctx, c, env, space, h)
	if err != nil {
		note := "snapshot: " + strings.TrimPrefix(err.Error(), "snapshot: ")
		if vs := pc.Unreadable(err); len(vs) > 0 {
			res.Violations = vs
			return fail(verdict.Fail, note)
		}
		return fail(verdict.Undecided, note)
	}
	if cs != nil {
		obs.Restarts = cs.Restarts()
	}
	obs.Restarts = append(obs.Restarts, pc.Restarts()...)
	observeInitial(c, space, &obs)
	for _, w := range res.Workers {
		if w.StartRetries > 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("worker %s: %d of its service starts got no hello within the start timeout and were retried; the second start answered", w.Worker, w.StartRetries))
		}
	}
	res.Notes = append(res.Notes, r.serviceRetryNotes(c.ID)...)
	res.Violations = check.Check(snap, obs)
	res.Notes = append(res.Notes, r.upgradeNote(res)...)
	for _, op := range snap.Ops {
		if op.Stage == reference.Completed {
			res.Completed++
		}
	}
	for _, cp := range snap.Checkpoints {
		if cp.Status == "saved" {
			res.Completed++
		}
	}
	res.Took = time.Since(start)
	switch {
	case len(res.Violations) > 0:
		res.Verdict = verdict.Fail
	case exercised && noRecrash:
		res.Verdict = verdict.NotApplicable
		res.Notes = append(res.Notes, verdict.RecrashNotApplicable)
	case !exercised && verdict.TornWithoutTear(miss, r.backend.ServerBacked()):
		res.Verdict = verdict.NotApplicable
		res.Notes = append(res.Notes, verdict.TornNotApplicable)
	case !exercised:
		res.Verdict = verdict.NotExercised
		res.NotExercised = miss
	case res.Completed == 0:
		res.Verdict = verdict.NotExercised
		res.Notes = append(res.Notes, "too little happened: no operation reached COMPLETED after recovery")
		res.NotExercised = verdict.NothingCompleted(h, tm)
	default:
		res.Verdict = verdict.Pass
	}
	return res
}

func findWorker(ws []verdict.WorkerResult, name string) *verdict.WorkerResult {
	for i := range ws {
		if ws[i].Worker == name {
			return &ws[i]
		}
	}
	return nil
}

func stepActions(c catalogue.Case, worker string) []catalogue.Action {
	for _, s := range c.Steps {
		if s.Worker == worker {
			return s.Actions
		}
	}
	return nil
}

// unfinished returns the actions of worker that never returned successfully
// (what its caller would resubmit), in order.
func unfinished(h history.Log, worker string, acts []catalogue.Action) []catalogue.Action {
	ok := map[int]bool{}
	for _, r := range h {
		if r.Worker == worker && r.Kind == history.Result && r.Err == "" {
			ok[r.Index] = true
		}
	}
	var out []catalogue.Action
	for i, a := range acts {
		if !ok[i] && a.Do != "recover" {
			out = append(out, a)
		}
	}
	return out
}

// storeTempDir is the folder of the run's folder that every store process
// of the run gets as its TMPDIR (CaseEnv.TempDir): one for the whole run,
// since a store process the supervisor keeps between cases (a pooled
// snapshot process) keeps the TMPDIR it was started with.
const storeTempDir = "store-tmp"

// RunNamespace returns a prefix for the namespaces of one run (Config.
// Namespace's default; the conformance suites' bundles over the store
// protocol take theirs from it too): unique per run, so that a store on a
// server, which keeps what earlier runs wrote, never meets their keys.
func RunNamespace() string { return fmt.Sprintf("r%x", time.Now().UnixNano()&0xffffffff) }

// Observe distils a case's history into what the checkers need.
func Observe(h history.Log, c catalogue.Case, space string) check.Observed {
	obs := check.Observed{ModelCalls: h.ModelCalls(), Prepared: map[string][]string{}, Quiet: true, Log: h}
	obs.Events = h.Events()
	for _, e := range obs.Events {
		if e.Kind == reference.EvPrepared {
			obs.Prepared[e.OperationID] = append(obs.Prepared[e.OperationID], e.Detail)
		}
	}
	threads := map[string]*check.PlanSaveThread{}
	var order []string
	for _, st := range c.Steps {
		for _, a := range st.Actions {
			if a.Thread != "" && a.Owner != "" && threads[a.Thread] == nil {
				threads[a.Thread] = &check.PlanSaveThread{Thread: ThreadID(space, a.Thread), Owner: a.Owner}
				order = append(order, a.Thread)
			}
		}
	}
	lastQuiesce := -1
	for i, rec := range h {
		if rec.Kind == history.Result && rec.Do == "recover" && rec.Worker == "quiesce" {
			lastQuiesce = i
		}
	}
	if lastQuiesce >= 0 {
		rec := h[lastQuiesce]
		obs.Quiet = rec.Err == ""
		if rec.Result != nil {
			obs.Rounds = rec.Result.Rounds
		}
	}
	// A result's thread is its action's (the record before it in the same
	// process's history).
	type at struct {
		worker     string
		phase, pid int
		index      int
	}
	actionThread := map[at]string{}
	for _, rec := range h {
		if rec.Kind == history.Action && rec.Thread != "" {
			actionThread[at{rec.Worker, rec.Phase, rec.PID, rec.Index}] = rec.Thread
		}
	}
	for _, rec := range h {
		if rec.Kind != history.Result {
			continue
		}
		t := threads[actionThread[at{rec.Worker, rec.Phase, rec.PID, rec.Index}]]
		switch rec.Do {
		case "plansave-start":
			// The operation_id the thread's first start gave is the one it
			// keeps (a service's own ids are not the reference's
			// "op-"+thread).
			if o := rec.Result; rec.Err == "" && o != nil && o.Op != "" && t != nil && t.StartedOp == "" {
				t.StartedOp = o.Op
			}
		case "plansave-invoke":
			if o := rec.Result; rec.Err == "" && o != nil && o.Status == "saved" {
				for _, th := range threads {
					if th == t || t == nil && o.Op == "op-"+th.Thread {
						th.ReturnedIDs = append(th.ReturnedIDs, o.PlanID)
					}
				}
			}
		case "plansave-conflict":
			if rec.Err != "" && strings.Contains(rec.Err, "was accepted") {
				obs.ConflictAccepted = append(obs.ConflictAccepted, rec.Err)
			}
		}
	}
	for _, t := range order {
		obs.Threads = append(obs.Threads, *threads[t])
	}
	return obs
}

// snapshot opens the backend afresh (as a new process would; read-only
// where the backend can, CaseEnv.ReadOnly) and reads the stores, and
// distils the history.
func (r *Runner) snapshot(ctx context.Context, c catalogue.Case, env CaseEnv, space string, h history.Log) (check.Snapshot, check.Observed, error) {
	obs := Observe(h, c, space)
	if r.cfg.Service != nil {
		return r.serviceSnapshot(ctx, c, env, space, obs)
	}
	b := r.judgedBackend()
	read := env
	read.ReadOnly = true
	st, err := b.Open(ctx, read)
	if err != nil {
		return check.Snapshot{}, obs, err
	}
	defer st.Close()
	var ps PlanSaveStores
	if c.System == faults.PlanSave && b.OpenPlanSave != nil {
		if ps, err = b.OpenPlanSave(ctx, env); err != nil {
			return check.Snapshot{}, obs, err
		}
		if ps.Closer != nil {
			defer ps.Closer.Close()
		}
	}
	snap, err := check.Take(ctx, st, space, ps.Checkpoints, ps.Plans, obs.Threads)
	return snap, obs, err
}
