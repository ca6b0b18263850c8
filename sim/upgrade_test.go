package sim

import (
	"context"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim/execmode"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

func openNothing(context.Context, CaseEnv) (reference.Stores, error) { return reference.Stores{}, nil }

func openNoPlanSave(context.Context, CaseEnv) (PlanSaveStores, error) { return PlanSaveStores{}, nil }

// A recovery build the case could not run on is refused before any case,
// with the reason.
func TestRecoveryBuildIsRefusedWhereItCannotRecover(t *testing.T) {
	a := Backend{Name: "a", Open: openNothing, Embedded: true}
	b := Backend{Name: "b", Open: openNothing, Embedded: true}
	withPlanSave := a
	withPlanSave.OpenPlanSave = openNoPlanSave
	volatile := b
	volatile.Embedded, volatile.Volatile = false, true
	server := b
	server.Embedded = false
	for _, c := range []struct {
		name string
		cfg  Config
		a    Backend
		want string
	}{
		{"in-process", Config{InProcess: true, RecoverUse: &b}, a, "needs real worker processes"},
		{"volatile", Config{RecoverUse: &volatile}, a, "is volatile"},
		{"elsewhere", Config{RecoverUse: &server}, a, "keeps its data elsewhere"},
		{"no System B", Config{RecoverUse: &b}, withPlanSave, "provides no System B stores"},
		{"unknown", Config{RecoverWith: &BackendSpec{Name: "no-such-backend"}}, a, `unknown backend "no-such-backend"`},
		{"no Open", Config{RecoverUse: &Backend{Name: "b", Embedded: true}}, a, "no Open"},
	} {
		if _, err := resolveRecovery(c.cfg, c.a); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	rec, err := resolveRecovery(Config{RecoverUse: &b, RecoverLabel: "b v2"}, a)
	if err != nil || rec == nil || rec.label != "b v2" || rec.spec.Name != "b" {
		t.Fatalf("a valid recovery build: %+v, %v", rec, err)
	}
	if rec, err := resolveRecovery(Config{}, a); rec != nil || err != nil {
		t.Errorf("no recovery build: %+v, %v; want none", rec, err)
	}
}

// A worker runs on version B from the first worker after one that died
// by a kill; before that, and in a case where nobody died, on version A.
func TestUpgradeComesAfterTheFirstKill(t *testing.T) {
	b := Backend{Name: "b", Open: openNothing}
	r := &Runner{backend: Backend{Name: "a"}, cfg: Config{Backend: BackendSpec{Name: "a"}},
		recover: &recovery{backend: b, spec: BackendSpec{Name: "b", Args: map[string]string{"v": "2"}}, label: "b"}}
	for _, c := range []struct {
		name string
		done []verdict.WorkerResult
		want bool
	}{
		{"first worker", nil, false},
		{"after a worker that lived", []verdict.WorkerResult{{Worker: "fault", Exit: "ok"}}, false},
		{"after an error", []verdict.WorkerResult{{Worker: "fault", Exit: "error: exit status 3"}}, false},
		{"after a kill", []verdict.WorkerResult{{Worker: "fault", Exit: "killed (SIGKILL)"}}, true},
		{"after a kill and a recovery", []verdict.WorkerResult{{Worker: "setup", Exit: "killed (SIGKILL)"}, {Worker: "fault", Exit: "ok"}}, true},
	} {
		spec := WorkerSpec{Worker: "next", Backend: r.cfg.Backend}
		if got := r.upgrade(&spec, c.done); got != c.want || spec.Upgraded != c.want {
			t.Errorf("%s: upgraded %v (spec %v), want %v", c.name, got, spec.Upgraded, c.want)
		}
		wantSpec := "a"
		if c.want {
			wantSpec = "b"
		}
		if spec.Backend.Name != wantSpec || r.stepBackend(spec).Name != wantSpec {
			t.Errorf("%s: spec backend %s, opens %s; want %s", c.name, spec.Backend.Name, r.stepBackend(spec).Name, wantSpec)
		}
	}
	if r.judgedBackend().Name != "b" {
		t.Errorf("snapshots open %s, want version B", r.judgedBackend().Name)
	}
	if line := r.UpgradeLine(); !strings.Contains(line, "recovered by version B, b") {
		t.Errorf("upgrade line %q", line)
	}
	broke := verdict.CaseResult{UpgradedAt: "recover", Violations: []check.Violation{{Invariant: check.I5}}}
	if n := r.upgradeNote(broke); len(n) != 1 || !strings.Contains(n[0], "from worker recover on") {
		t.Errorf("an upgraded case that broke I5: notes %q, want one naming the first worker on version B", n)
	}
	for _, res := range []verdict.CaseResult{{UpgradedAt: "recover"}, {Violations: broke.Violations}} {
		if n := r.upgradeNote(res); n != nil {
			t.Errorf("%+v: note %q, want none (it passed, or ran on version A alone)", res, n)
		}
	}
	plain := &Runner{backend: Backend{Name: "a"}}
	spec := WorkerSpec{}
	if plain.upgrade(&spec, []verdict.WorkerResult{{Exit: "killed (SIGKILL)"}}) || plain.judgedBackend().Name != "a" || plain.UpgradeLine() != "" {
		t.Error("a run without a recovery build upgraded")
	}
}

// A re-executed worker of a Go test opens the build its spec says.
func TestWorkerBackendFollowsTheSpec(t *testing.T) {
	a, b := Backend{Name: "a"}, Backend{Name: "b"}
	if got, err := WorkerBackend(WorkerSpec{}, a, &b); err != nil || got.Name != "a" {
		t.Errorf("not upgraded: %s, %v", got.Name, err)
	}
	if got, err := WorkerBackend(WorkerSpec{Upgraded: true}, a, &b); err != nil || got.Name != "b" {
		t.Errorf("upgraded: %s, %v", got.Name, err)
	}
	if _, err := WorkerBackend(WorkerSpec{Upgraded: true, Worker: "recover"}, a, nil); err == nil || !strings.Contains(err.Error(), "recovery build") {
		t.Errorf("upgraded without a recovery build: %v", err)
	}
}

// What version B holds across cases (store-cmd's pooled snapshot
// processes) goes with the runner's shared handles, as version A's does:
// a run over many scenarios left one idle store process of B per
// scenario until it exited.
func TestCloseSharedClosesTheRecoveryBuild(t *testing.T) {
	var a, b int
	r := &Runner{backend: Backend{Name: "a", Close: func() error { a++; return nil }},
		recover: &recovery{backend: Backend{Name: "b", Close: func() error { b++; return nil }}}}
	r.modes = execmode.New(r.execRun())
	r.CloseShared()
	if a != 1 || b != 1 {
		t.Errorf("CloseShared closed version A %d times, version B %d times; want once each", a, b)
	}
}
