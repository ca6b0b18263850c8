package sim_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/internal/procstat"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/embedded"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The test binary is also the worker (and, for one test, a supervisor):
// the runner re-executes it with the worker's spec in the environment.
const supervisorDirEnv = "CRASHMATRIX_TEST_SUPERVISOR_DIR"

func TestMain(m *testing.M) {
	sim.RegisterBackend(dieInGraphWrite, func(sim.BackendSpec) (sim.Backend, error) { return dyingBackend(), nil })
	sim.RegisterBackend(spawnsChild, func(sim.BackendSpec) (sim.Backend, error) { return childBackend(), nil })
	sim.RegisterBackend(slowAlways, func(sim.BackendSpec) (sim.Backend, error) { return slowBackend(slowAlways, false), nil })
	sim.RegisterBackend(slowOnce, func(sim.BackendSpec) (sim.Backend, error) { return slowBackend(slowOnce, true), nil })
	sim.RegisterBackend(heavy, func(sim.BackendSpec) (sim.Backend, error) { return heavyBackend(), nil })
	sim.RegisterBackend(elsewhere, func(sim.BackendSpec) (sim.Backend, error) { return elsewhereBackend(), nil })
	if path := os.Getenv(sim.WorkerSpecEnv); path != "" {
		os.Exit(testWorker(path))
	}
	if dir := os.Getenv(supervisorDirEnv); dir != "" {
		os.Exit(testSupervisor(dir))
	}
	os.Exit(m.Run())
}

func testWorker(path string) int {
	spec, err := sim.ReadWorkerSpec(path)
	if err == nil {
		var b sim.Backend
		if b, err = sim.ResolveBackend(spec.Backend); err == nil {
			err = sim.RunWorker(context.Background(), spec, b, sim.ProcessWorkerOptions())
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 3
	}
	return 0
}

// Test backends: the embedded default, with a twist in worker processes.
const (
	dieInGraphWrite = "sqlite-dies-in-graph-write"
	spawnsChild     = "sqlite-spawns-child"
	slowAlways      = "sqlite-slow-first-write"
	slowOnce        = "sqlite-slow-first-write-once"
	heavy           = "sqlite-heavy-workers"
)

// workerName is the name of the worker this process runs, or "" in the
// supervisor.
func workerName() string {
	path := os.Getenv(sim.WorkerSpecEnv)
	if path == "" {
		return ""
	}
	spec, err := sim.ReadWorkerSpec(path)
	if err != nil {
		return ""
	}
	return spec.Worker
}

// dyingWriter kills its process (SIGKILL, as the OOM killer or a node
// failure would) on its first write: the worker dies between two
// failpoints, before it can report any hit after the graph write.
type dyingWriter struct{ reference.GraphWriter }

func (dyingWriter) Apply(context.Context, string, reference.Mutation) error {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// faultWorkerBackend is the embedded default under another name, with
// twist applied to the stores the "fault" worker process opens.
func faultWorkerBackend(name string, twist func(env sim.CaseEnv, st *reference.Stores) error) sim.Backend {
	b := embedded.SQLite()
	b.Name = name
	open := b.Open
	b.Open = func(ctx context.Context, env sim.CaseEnv) (reference.Stores, error) {
		st, err := open(ctx, env)
		if err == nil && workerName() == "fault" {
			err = twist(env, &st)
		}
		return st, err
	}
	return b
}

// slowWriter takes d over its first graph write: a step longer than the
// lease, as on an overloaded machine.
type slowWriter struct {
	reference.GraphWriter
	d    time.Duration
	once sync.Once
}

func (w *slowWriter) Apply(ctx context.Context, space string, m reference.Mutation) error {
	w.once.Do(func() { time.Sleep(w.d) })
	return w.GraphWriter.Apply(ctx, space, m)
}

// slowBackend makes the fault worker's first graph write take three lease
// TTLs (the TTL it was given); once makes only the first fault worker of
// the run that slow (a marker in the run's work directory), as a machine
// that was busy for a moment.
func slowBackend(name string, once bool) sim.Backend {
	return faultWorkerBackend(name, func(env sim.CaseEnv, st *reference.Stores) error {
		spec, err := sim.ReadWorkerSpec(os.Getenv(sim.WorkerSpecEnv))
		if err != nil {
			return err
		}
		d := 3 * time.Duration(spec.LeaseTTLMillis) * time.Millisecond
		if once {
			// env.Dir is <workdir>/<case>/data.
			marker := filepath.Join(filepath.Dir(filepath.Dir(env.Dir)), "slowed-once")
			f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				d = 0
			} else {
				f.Close()
			}
		}
		st.Writer = &slowWriter{GraphWriter: st.Writer, d: d}
		return nil
	})
}

// ballast keeps a heavy worker's memory.
var ballast []byte

// heavyBackend's worker processes hold 512 MiB each, so that dying takes
// them a while (the kernel frees every page): long enough for a supervisor
// that does not wait for its killed workers to return before they are gone.
func heavyBackend() sim.Backend {
	b := embedded.SQLite()
	b.Name = heavy
	open := b.Open
	b.Open = func(ctx context.Context, env sim.CaseEnv) (reference.Stores, error) {
		if workerName() != "" {
			ballast = make([]byte, 512<<20)
			for i := 0; i < len(ballast); i += 4096 {
				ballast[i] = 1
			}
		}
		return open(ctx, env)
	}
	return b
}

func dyingBackend() sim.Backend {
	return faultWorkerBackend(dieInGraphWrite, func(_ sim.CaseEnv, st *reference.Stores) error {
		st.Writer = dyingWriter{st.Writer}
		return nil
	})
}

// childBackend starts a grandchild (sleep) in the fault worker's process
// group and writes its pid next to the case's data: killing the worker
// alone would leave it running.
func childBackend() sim.Backend {
	return faultWorkerBackend(spawnsChild, func(env sim.CaseEnv, _ *reference.Stores) error {
		cmd := exec.Command("sleep", "600")
		if err := cmd.Start(); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(env.Dir, "child.pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	})
}

func processRunner(t *testing.T, backend string, mod func(*sim.Config)) *sim.Runner {
	t.Helper()
	cfg := sim.Config{Backend: sim.BackendSpec{Name: backend}, WorkDir: t.TempDir(), Seed: 1,
		Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}}
	if mod != nil {
		mod(&cfg)
	}
	r, err := sim.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// alive says whether pid is a process that has not ended (a zombie has).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	st, err := procstat.Read(pid)
	return err == nil && !st.Gone()
}

func waitGone(t *testing.T, what string, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still running", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the worker did not start its child: %v", err)
	}
	pid, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// hangCase is a case whose only worker stalls for ten minutes at its first
// graph write (a foreground pause just sleeps).
// hangCase stalls its worker ten minutes: a hang on the wall clock (the
// runner must set Config.WallClock; on the harness clock a pause is free).
func hangCase() catalogue.Case {
	return catalogue.Case{ID: "hang", System: faults.Ingestion, Class: "hang",
		Steps: []catalogue.Step{{Worker: "fault", Actions: catalogue.StandardScript(), ExpectHit: []faults.Point{faults.BeforeGraphWrite},
			Arms: faults.Arms{faults.BeforeGraphWrite: faults.PauseOn(10*time.Minute, 1)}}}}
}

// A worker that hangs is killed at its deadline, with its whole process
// group (a grandchild it started dies too), and the case is undecided,
// never a pass.
func TestDeadlineKillsHungWorkerAndItsGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	r := processRunner(t, spawnsChild, func(c *sim.Config) {
		c.ProcessTimeout = 5 * time.Second
		c.WallClock = true // the hang is a pause on the wall clock
		// The backend says what its servers were doing at the deadline.
		b, err := sim.ResolveBackend(c.Backend)
		if err != nil {
			t.Fatal(err)
		}
		b.Diagnose = func(context.Context, sim.CaseEnv) string {
			return "test: 1 session waiting for a lock\nsession 7 blocked by 8"
		}
		c.Use = &b
	})
	start := time.Now()
	res := r.RunCase(context.Background(), hangCase())
	took := time.Since(start)
	if res.Verdict != verdict.Undecided {
		t.Fatalf("verdict %s, want %s (notes %v)", res.Verdict, verdict.Undecided, res.Notes)
	}
	if len(res.Workers) != 1 || res.Workers[0].Exit != "timeout" {
		t.Fatalf("workers %+v, want one that timed out", res.Workers)
	}
	if !strings.Contains(strings.Join(res.Notes, "; "), "hung and was killed after 5s") {
		t.Fatalf("notes %v do not say the worker hung", res.Notes)
	}
	if notes := strings.Join(res.Notes, "; "); !strings.Contains(notes, "servers at the deadline: test: 1 session waiting for a lock ("+filepath.Join(res.Dir, sim.ServersAtDeadline)+")") {
		t.Fatalf("notes %v do not give the servers' state at the deadline", res.Notes)
	}
	// Its stacks at the deadline say where it hung: parked at the pause
	// armed at beforeGraphWrite, inside the reference's graph step.
	stuck := strings.Join(res.Workers[0].Stuck, "; ")
	if !strings.Contains(stuck, "reference.") || !strings.Contains(strings.Join(res.Notes, "; "), "stuck in") {
		t.Fatalf("stuck %q, notes %v: want the reference frame the worker hung in", stuck, res.Notes)
	}
	if b, err := os.ReadFile(res.Workers[0].Output); err != nil || !strings.Contains(string(b), "goroutine ") {
		t.Fatalf("the hung worker's output %s holds no goroutine dump (%v)", res.Workers[0].Output, err)
	}
	if took > 20*time.Second {
		t.Fatalf("the case took %s: the 5s deadline did not act", took)
	}
	if alive(res.Workers[0].PID) {
		t.Fatalf("worker %d still running", res.Workers[0].PID)
	}
	waitGone(t, "the hung worker's grandchild", readPID(t, filepath.Join(res.Dir, "data", "child.pid")))
}

// A worker that dies before it reports its hit leaves the case not
// exercised, whatever the checks say: never a pass. Retries do not change
// that, and the reason says the point was not reached.
func TestWorkerDyingBeforeItsHitIsNotExercised(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	r := processRunner(t, dieInGraphWrite, nil)
	c, _ := catalogue.Lease(250*time.Millisecond).WindowCase(faults.BeforeGraphApplied, faults.Crash)
	rep := r.RunAll(context.Background(), []catalogue.Case{c}, 1, nil)
	res := rep.Results[0]
	if res.Verdict != verdict.NotExercised {
		t.Fatalf("verdict %s, want %s (notes %v, violations %v)", res.Verdict, verdict.NotExercised, res.Notes, res.Violations)
	}
	if rep.ExitCode != 1 || rep.Verdict == verdict.Pass {
		t.Fatalf("run verdict %s exit %d, want a failing run", rep.Verdict, rep.ExitCode)
	}
	if res.NotExercised == nil || res.NotExercised.Cause != verdict.CauseUnreachable || !strings.Contains(res.NotExercised.Detail, "killed") {
		t.Fatalf("reason %+v, want unreachable: the worker was killed before the hit", res.NotExercised)
	}
	if len(res.Attempts) != 2 {
		t.Fatalf("%d earlier attempts, want 2 (three runs in all)", len(res.Attempts))
	}
	if res.Hits[string(faults.BeforeGraphApplied)] != 0 {
		t.Fatalf("hits %v", res.Hits)
	}
}

// Cancelling a run (Ctrl-C) kills every worker process group at once: no
// worker and no grandchild outlives the run.
func TestCancelKillsEveryWorkerGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	r := processRunner(t, spawnsChild, func(c *sim.Config) { c.WallClock = true }) // the hang is a pause on the wall clock
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan verdict.CaseResult)
	go func() { done <- r.RunCase(ctx, hangCase()) }()
	// Wait for the hang.
	hist := filepath.Join(r.Config().WorkDir, "hang", "history.jsonl")
	waitFor(t, func() bool { h, _ := history.Read(hist); return len(h.Hits()) > 0 })
	h, _ := history.Read(hist)
	workerPID := h[0].PID
	childPID := readPID(t, filepath.Join(r.Config().WorkDir, "hang", "data", "child.pid"))
	cancel()
	res := <-done
	if res.Verdict != verdict.Undecided {
		t.Fatalf("verdict %s after cancel, want undecided", res.Verdict)
	}
	waitGone(t, "worker", workerPID)
	waitGone(t, "grandchild", childPID)
}

// A case interrupted while one worker is paused in the background and
// another waits for its lease returns only once both are gone (killed and
// reaped): a run that exits at once leaves dying workers behind, writing
// into the folders it removes. Each worker holds 512 MiB, so its death
// takes long enough to be seen.
func TestCancelReturnsOnceEveryWorkerIsGone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	r := processRunner(t, heavy, func(c *sim.Config) { c.LeaseTTL = 2 * time.Second })
	c := catalogue.Case{ID: "paused-and-waiting", System: faults.Ingestion, Class: "hang",
		Steps: []catalogue.Step{
			{Worker: "paused", Actions: catalogue.StandardScript(), Background: true, ExpectHit: []faults.Point{faults.BeforeGraphApplied},
				Arms: faults.Arms{faults.BeforeGraphApplied: faults.PauseOn(10*time.Minute, 1)}},
			// d4, whose lease the paused worker holds: it waits.
			{Worker: "waiting", Actions: []catalogue.Action{{Do: "ingest", Doc: "d4", Content: catalogue.DocD2}}, Background: true},
			// The last step waits for paused workers (it is the final
			// recovery): the case never gets there.
			{Worker: "quiesce", Actions: []catalogue.Action{{Do: "recover", Rounds: 1}}},
		}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan verdict.CaseResult)
	go func() { done <- r.RunCase(ctx, c) }()
	hist := filepath.Join(r.Config().WorkDir, c.ID, "history.jsonl")
	pids := map[string]int{}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		h, _ := history.Read(hist)
		waiting := false
		for _, rec := range h {
			if rec.Kind == history.Start {
				pids[rec.Worker] = rec.PID
			}
			waiting = waiting || rec.Worker == "waiting" && rec.Kind == history.Event && rec.Event.Kind == reference.EvInvoke
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second worker never came to wait for the lease:\n%s", strings.Join(history.Trace(h), "\n"))
		}
	}
	cancel()
	if res := <-done; res.Verdict != verdict.Undecided {
		t.Fatalf("verdict %s after cancel, want undecided", res.Verdict)
	}
	for _, w := range []string{"paused", "waiting"} {
		if err := syscall.Kill(pids[w], 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("worker %s (pid %d) still exists when the interrupted case has returned (kill 0: %v)", w, pids[w], err)
		}
	}
}

// failingLauncher cannot start the worker named "unstartable".
type failingLauncher struct{ sim.ReexecLauncher }

func (l failingLauncher) Command(ctx context.Context, spec string) *exec.Cmd {
	if strings.HasSuffix(spec, "-unstartable.json") {
		return exec.Command(filepath.Join(os.TempDir(), "no-such-worker-binary"))
	}
	return l.ReexecLauncher.Command(ctx, spec)
}

// A case that ends early on an error while a worker is paused in the
// background kills that worker and returns once it is gone: it would
// otherwise wait for a release until its deadline.
func TestACaseThatEndsEarlyKillsItsPausedWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	r := processRunner(t, "sqlite", func(c *sim.Config) {
		c.Launcher = failingLauncher{sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}}
	})
	c := catalogue.Case{ID: "paused-then-unstartable", System: faults.Ingestion, Class: "hang",
		Steps: []catalogue.Step{
			{Worker: "paused", Actions: catalogue.StandardScript(), Background: true, ExpectHit: []faults.Point{faults.BeforeGraphApplied},
				Arms: faults.Arms{faults.BeforeGraphApplied: faults.PauseOn(10*time.Minute, 1)}},
			{Worker: "unstartable", Actions: []catalogue.Action{{Do: "recover", Rounds: 1}}},
			{Worker: "quiesce", Actions: []catalogue.Action{{Do: "recover", Rounds: 1}}},
		}}
	done := make(chan verdict.CaseResult)
	go func() { done <- r.RunCase(context.Background(), c) }()
	var res verdict.CaseResult
	select {
	case res = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the case did not return a minute after its worker could not start")
	}
	if res.Verdict != verdict.Undecided || len(res.Notes) == 0 || !strings.Contains(res.Notes[0], "start worker unstartable") {
		t.Fatalf("verdict %s, notes %q; want undecided, the worker could not start", res.Verdict, res.Notes)
	}
	h, err := history.Read(filepath.Join(r.Config().WorkDir, c.ID, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	pid := 0
	for _, rec := range h {
		if rec.Kind == history.Start && rec.Worker == "paused" {
			pid = rec.PID
		}
	}
	if !h.HitBy("paused", faults.BeforeGraphApplied) || pid == 0 {
		t.Fatalf("the paused worker never paused:\n%s", strings.Join(history.Trace(h), "\n"))
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the paused worker (pid %d) still exists when the case has returned (kill 0: %v)", pid, err)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testSupervisor is the supervisor process TestHistorySurvivesSupervisorCrash
// kills: it runs the hanging case in dir.
func testSupervisor(dir string) int {
	// The hang is a long pause on the wall clock (on the harness clock a
	// pause costs nothing).
	r, err := sim.NewRunner(sim.Config{Backend: sim.BackendSpec{Name: spawnsChild}, WorkDir: dir, Seed: 1, WallClock: true,
		Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	r.RunCase(context.Background(), hangCase())
	return 0
}

// The history is the workers' own appends to a file: a supervisor killed
// mid-case loses the case's verdict and its report, nothing the workers
// recorded. Its worker dies with it (the parent-death signal), and the
// grandchild in the worker's group is left to the next run's clean-up:
// this test documents that.
func TestHistorySurvivesSupervisorCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	dir := t.TempDir()
	sup := exec.Command(os.Args[0], "-test.run=^$")
	sup.Env = append(os.Environ(), supervisorDirEnv+"="+dir)
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	hist := filepath.Join(dir, "hang", "history.jsonl")
	waitFor(t, func() bool { h, _ := history.Read(hist); return len(h.Hits()) > 0 })
	before, err := os.ReadFile(hist)
	if err != nil {
		t.Fatal(err)
	}
	_ = sup.Process.Kill()
	_ = sup.Wait()
	h, err := history.Read(hist)
	if err != nil {
		t.Fatalf("history after the supervisor's crash: %v", err)
	}
	after, _ := os.ReadFile(hist)
	if !strings.HasPrefix(string(after), string(before)) {
		t.Fatal("the history lost records when the supervisor died")
	}
	var kinds []string
	for _, r := range h {
		kinds = append(kinds, string(r.Kind))
	}
	if len(h) < 3 || h[0].Kind != history.Start || h[len(h)-1].Kind != history.Hit || len(h.Events()) == 0 {
		t.Fatalf("history %v: want start, the worker's events, its hit", kinds)
	}
	waitGone(t, "worker after its supervisor died", h[0].PID)
	child := readPID(t, filepath.Join(dir, "hang", "data", "child.pid"))
	if alive(child) {
		// Documented loss: a grandchild outlives a killed supervisor.
		_ = syscall.Kill(child, syscall.SIGKILL)
	}
}

// A case whose worker lost its lease to one slow step (three TTLs long) is
// not exercised for lack of time: with fixed timings it is reported so
// (cause timing, with advice); with adaptive timings the run raises the TTL
// and the retry, with a longer TTL, exercises the window.
func TestSlowStepIsRetriedWithLongerTimings(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	c, _ := catalogue.Lease(250*time.Millisecond).WindowCase(faults.BeforeStateCommitted, faults.Crash)

	// Wall-clock leases: on the harness clock a slow step takes no lease
	// time at all (TestHarnessClockIgnoresSlowSteps).
	// With a fixed TTL the case is undecided, the store not blamed: its
	// steps outran the TTL (sim.TTLTooShortError).
	fixed := processRunner(t, slowAlways, func(c *sim.Config) { c.LeaseTTL = 250 * time.Millisecond; c.WallClock = true })
	res := fixed.RunAll(context.Background(), []catalogue.Case{c}, 1, nil).Results[0]
	if res.Verdict != verdict.Undecided || len(res.Attempts) == 0 || res.Attempts[0].Reason.Cause != verdict.CauseTiming {
		t.Fatalf("fixed timings: verdict %s, attempts %+v; want undecided after attempts not exercised for timing", res.Verdict, res.Attempts)
	}
	if note := strings.Join(res.Notes, "; "); !strings.Contains(note, "lost its lease") || !strings.Contains(note, "raise --lease-ttl to at least") {
		t.Fatalf("notes %q do not say what happened and what to do", res.Notes)
	}
	for _, a := range res.Attempts {
		if a.LeaseTTL != 250*time.Millisecond {
			t.Fatalf("fixed timings changed the TTL: attempts %+v", res.Attempts)
		}
	}

	adaptive := processRunner(t, slowOnce, func(c *sim.Config) { c.LeaseTTL = 250 * time.Millisecond; c.Adaptive = true; c.WallClock = true })
	rep := adaptive.RunAll(context.Background(), []catalogue.Case{c}, 1, nil)
	res = rep.Results[0]
	if res.Verdict != verdict.Pass {
		t.Fatalf("adaptive timings: verdict %s (notes %v, attempts %+v), want pass", res.Verdict, res.Notes, res.Attempts)
	}
	if len(res.Attempts) != 1 || res.Attempts[0].Reason.Cause != verdict.CauseTiming {
		t.Fatalf("attempts %+v, want one earlier attempt not exercised for timing (timing %s, case TTL %s)", res.Attempts, rep.Timing, res.LeaseTTL)
	}
	if res.LeaseTTL < 2*res.Attempts[0].LeaseTTL {
		t.Fatalf("retried with lease TTL %s after %s, want at least twice as long", res.LeaseTTL, res.Attempts[0].LeaseTTL)
	}
	if len(rep.Timing.Rescales) == 0 || rep.Timing.LeaseTTL != rep.Timing.Rescales[len(rep.Timing.Rescales)-1].To {
		t.Fatalf("timing %+v: want the rise recorded", rep.Timing)
	}
	if rep.Timing.Calibration == nil || rep.Timing.Source != "calibrated" {
		t.Fatalf("timing %+v: want a calibration", rep.Timing)
	}
}

// On the harness clock (the process mode's default) time moves only when
// a worker sleeps or stalls: the step that lost its lease on the wall
// clock (TestSlowStepIsRetriedWithLongerTimings: three TTLs long) takes no
// lease time, the window is exercised the first time with the configured
// TTL, and a pause far past the lease costs no real time.
func TestHarnessClockIgnoresSlowSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes")
	}
	c, _ := catalogue.Lease(250*time.Millisecond).WindowCase(faults.BeforeStateCommitted, faults.Crash)
	r := processRunner(t, slowAlways, func(c *sim.Config) { c.LeaseTTL = 250 * time.Millisecond })
	rep := r.RunAll(context.Background(), []catalogue.Case{c}, 1, nil)
	res := rep.Results[0]
	if res.Verdict != verdict.Pass || len(res.Attempts) != 0 || res.LeaseTTL != 250*time.Millisecond {
		t.Fatalf("verdict %s (notes %v, attempts %+v, TTL %s), want a pass on the first attempt with the configured TTL", res.Verdict, res.Notes, res.Attempts, res.LeaseTTL)
	}
	if rep.Timing.Source != "harness clock" || !strings.Contains(rep.Timing.String(), "(harness clock)") {
		t.Fatalf("timing %q does not say the leases ran on the harness clock", rep.Timing)
	}

	// A stall of 480 lease TTLs, past which recovery takes the document
	// over: on the wall clock it would take two minutes of waiting (and
	// outlive the worker's 30 s deadline).
	long := catalogue.Case{ID: "long-stall", System: faults.Ingestion, Class: "long-stall", Steps: []catalogue.Step{
		{Worker: "fault", Actions: catalogue.StandardScript(), Arms: faults.Arms{faults.BeforeGraphWrite: faults.PauseOn(2*time.Minute, 1)},
			Background: true, ContinueOnError: true, ExpectHit: []faults.Point{faults.BeforeGraphWrite},
			Meanwhile: &catalogue.Meanwhile{Worker: "recover", Does: catalogue.DeedLease}},
		{Worker: "recover", Actions: []catalogue.Action{{Do: "recover"}}, ContinueOnError: true},
		{Worker: "quiesce", Actions: []catalogue.Action{{Do: "recover"}}, Resubmit: []string{"fault"}, ContinueOnError: true},
	}}
	r2 := processRunner(t, "sqlite", func(c *sim.Config) { c.LeaseTTL = 250 * time.Millisecond })
	start := time.Now()
	res = r2.RunCase(context.Background(), long)
	if res.Verdict != verdict.Pass {
		t.Fatalf("long stall: verdict %s, notes %v, broke %v", res.Verdict, res.Notes, res.Broken())
	}
	if took := time.Since(start); took >= time.Minute {
		t.Fatalf("a two-minute stall on the harness clock took %s of real time", took)
	}
}

// A lease or claim TTL reaches the workers in whole milliseconds: 1ns was
// 0ms there, the service's own 2s default, while the checker judged the
// leases by 1ns and blamed the store (I7). NewRunner refuses it.
func TestNewRunnerRefusesATTLTheWorkersCannotKeep(t *testing.T) {
	for _, cfg := range []sim.Config{{LeaseTTL: time.Nanosecond}, {LeaseTTL: -time.Second}, {LeaseTTL: 1500 * time.Microsecond},
		{LeaseTTL: time.Second, ClaimTTL: time.Microsecond}} {
		cfg.Backend = sim.BackendSpec{Name: "sqlite"}
		if _, err := sim.NewRunner(cfg); err == nil || !strings.Contains(err.Error(), "want a whole number of milliseconds, at least 1ms") {
			t.Errorf("lease TTL %s, claim TTL %s: NewRunner error %v, want the TTL refused", cfg.LeaseTTL, cfg.ClaimTTL, err)
		}
	}
}

// With a fixed lease TTL on the wall clock too short for its steps, the
// probe does not run its cases (they would not be exercised, and the
// whole matrix's report would count them against the store): it returns
// the calibration's TTLTooShortError.
func TestProbeWithATooShortFixedTTLIsUndecided(t *testing.T) {
	r := processRunner(t, "sqlite", func(c *sim.Config) { c.WallClock, c.LeaseTTL = true, time.Millisecond })
	pr, err := r.Probe(context.Background())
	var short *sim.TTLTooShortError
	if !errors.As(err, &short) || short.TTL != time.Millisecond || short.Need < 50*time.Millisecond {
		t.Fatalf("probe error %v, want a TTLTooShortError for 1ms", err)
	}
	if len(pr.Results) != 0 {
		t.Fatalf("the probe ran %d cases with a TTL it knew too short", len(pr.Results))
	}
}
