package properties

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

// suiteT is the part of testing.TB the conformance suites use; it exists so a
// suite can run into a Recorder (to prove it fails for a broken store) as
// well as into a real *testing.T.
type suiteT interface {
	// Helper marks the caller as a helper, as testing.TB.Helper.
	Helper()
	// Name is the full name of the (sub)test, used in reproduce lines.
	Name() string
	// Errorf records a failure and continues.
	Errorf(format string, args ...any)
	// Fatalf records a failure and ends the (sub)test goroutine.
	Fatalf(format string, args ...any)
	// Logf records a note shown with failures.
	Logf(format string, args ...any)
	// Failed reports whether the (sub)test failed so far.
	Failed() bool
	// Fatal is Fatalf with the arguments printed as fmt.Sprint does.
	Fatal(args ...any)
	// Error is Errorf with the arguments printed as fmt.Sprint does.
	Error(args ...any)
	// Skipf records why the (sub)test does not apply and ends it.
	Skipf(format string, args ...any)
	// Cleanup registers a function to run when the (sub)test ends.
	Cleanup(func())
	// TempDir returns a directory removed when the (sub)test ends.
	TempDir() string
	// Run runs f as a subtest named name and reports whether it passed.
	Run(name string, f func(suiteT)) bool
}

// wrapT adapts a *testing.T to suiteT, so the run* suite cores can be called from
// an ordinary test.
func wrapT(t *testing.T) suiteT { return confTB{t} }

// unwrapT returns the *testing.T behind a suiteT made by wrapT, or nil; it exists
// so factories written for *testing.T can be reached from a T.
func unwrapT(t suiteT) *testing.T {
	if s, ok := t.(*confScope); ok {
		t = s.suiteT
	}
	if w, ok := t.(confTB); ok {
		return w.T
	}
	return nil
}

type confTB struct{ *testing.T }

// Run runs f as a *testing.T subtest, handing it a T.
func (c confTB) Run(name string, f func(suiteT)) bool {
	return c.T.Run(name, func(t *testing.T) { f(confTB{t}) })
}

// confLift turns a *testing.T factory into a T factory. A T that is not a
// wrapped *testing.T (a Recorder) cannot be passed to such a factory, so the
// suite fails loudly instead.
func confLift[S any](newStore func(t *testing.T) S) func(suiteT) S {
	return func(t suiteT) S {
		tt := unwrapT(t)
		if tt == nil {
			t.Fatalf("factory needs a *testing.T; use the Run* form of the suite with a T factory")
		}
		return newStore(tt)
	}
}

// failure is one failure a recorder collected: the full subtest name and the
// message.
type failure struct {
	// Test is the full subtest name, e.g. "Mutant/PlanRoundTrip/Full".
	Test string
	// Message is the failure text.
	Message string
	// Fatal is true for Fatalf (the subtest stopped there).
	Fatal bool
}

// String renders the failure like the testing package does.
func (f failure) String() string { return f.Test + ": " + f.Message }

// recorder is a suiteT that collects failures instead of failing the calling
// test. Mutation tests run a suite against a deliberately broken store into
// a Recorder and assert that the suite failed, and where.
type recorder struct {
	name   string
	root   *confRecorderLog
	mu     sync.Mutex
	failed bool
	clean  []func()
}

type confRecorderLog struct {
	mu       sync.Mutex
	failures []failure
	logs     []string
	// run, when set, narrows the subtests that run (runPattern); ran
	// counts those it matched all the way.
	run runPattern
	ran int
}

// newRecorder returns a recorder whose tests are named under name.
func newRecorder(name string) *recorder {
	return &recorder{name: name, root: &confRecorderLog{}}
}

// Helper does nothing; it exists to satisfy T.
func (r *recorder) Helper() {}

// Name returns the full name of the (sub)test.
func (r *recorder) Name() string { return r.name }

func (r *recorder) fail(fatal bool, format string, args ...any) {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
	r.root.mu.Lock()
	r.root.failures = append(r.root.failures, failure{Test: r.name, Message: fmt.Sprintf(format, args...), Fatal: fatal})
	r.root.mu.Unlock()
}

// Errorf records a failure and continues.
func (r *recorder) Errorf(format string, args ...any) { r.fail(false, format, args...) }

// Fatalf records a failure and stops the (sub)test goroutine, as
// testing.T.Fatalf does.
func (r *recorder) Fatalf(format string, args ...any) {
	r.fail(true, format, args...)
	runtime.Goexit()
}

// Fatal records a failure and stops the (sub)test goroutine.
func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprintln(args...)) }

// Error records a failure and continues.
func (r *recorder) Error(args ...any) { r.Errorf("%s", fmt.Sprintln(args...)) }

// Skipf keeps the reason as a log line and stops the (sub)test goroutine
// without failing it, as testing.T.Skipf does.
func (r *recorder) Skipf(format string, args ...any) {
	r.Logf("SKIP: "+format, args...)
	runtime.Goexit()
}

// Logf keeps a log line (see Logs).
func (r *recorder) Logf(format string, args ...any) {
	r.root.mu.Lock()
	r.root.logs = append(r.root.logs, r.name+": "+fmt.Sprintf(format, args...))
	r.root.mu.Unlock()
}

// Failed reports whether this (sub)test or one of its subtests failed.
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// Cleanup registers f to run when the (sub)test ends, last registered first.
func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	r.clean = append(r.clean, f)
	r.mu.Unlock()
}

// TempDir returns a fresh directory removed when the (sub)test ends.
func (r *recorder) TempDir() string {
	dir, err := os.MkdirTemp("", "conformance-")
	if err != nil {
		r.Fatalf("TempDir: %v", err)
	}
	r.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Run runs f as a subtest in its own goroutine (so Fatalf can stop it),
// waits for it, runs its cleanups and reports whether it passed.
func (r *recorder) Run(name string, f func(suiteT)) bool {
	child := &recorder{name: r.name + "/" + name, root: r.root}
	if run := r.root.run; run != nil {
		path := strings.Split(strings.TrimPrefix(child.name, "/"), "/")
		if !run.matches(path) {
			return true // not asked for: as go test -run leaves it out
		}
		if len(path) == len(run) {
			r.root.mu.Lock()
			r.root.ran++
			r.root.mu.Unlock()
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer child.runCleanups()
		defer func() {
			if p := recover(); p != nil {
				child.fail(true, "panic: %v\n%s", p, debug.Stack())
			}
		}()
		f(child)
	}()
	<-done
	if child.Failed() {
		r.mu.Lock()
		r.failed = true
		r.mu.Unlock()
		return false
	}
	return true
}

// Close runs the cleanups registered on the top-level recorder.
func (r *recorder) Close() { r.runCleanups() }

func (r *recorder) runCleanups() {
	for {
		r.mu.Lock()
		if len(r.clean) == 0 {
			r.mu.Unlock()
			return
		}
		f := r.clean[len(r.clean)-1]
		r.clean = r.clean[:len(r.clean)-1]
		r.mu.Unlock()
		f()
	}
}

// Failures returns every failure recorded so far, in order.
func (r *recorder) Failures() []failure {
	r.root.mu.Lock()
	defer r.root.mu.Unlock()
	return append([]failure(nil), r.root.failures...)
}

// FailuresIn returns the failures of the subtest whose full name is test or
// starts with test + "/".
func (r *recorder) FailuresIn(test string) []failure {
	var out []failure
	for _, f := range r.Failures() {
		if f.Test == test || strings.HasPrefix(f.Test, test+"/") {
			out = append(out, f)
		}
	}
	return out
}

// Logs returns every log line recorded so far.
func (r *recorder) Logs() []string {
	r.root.mu.Lock()
	defer r.root.mu.Unlock()
	return append([]string(nil), r.root.logs...)
}

// confCase is one named subtest of a suite; run receives a factory bound to
// the subtest, so each call gives a fresh store.
type confCase[S any] struct {
	name string
	run  func(t suiteT, fresh func() S)
}

// confRun runs every case as a subtest on fresh stores; a failing subtest
// logs the go test -run pattern that reproduces it.
func confRun[S any](t suiteT, newStore func(suiteT) S, cases []confCase[S]) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t suiteT) {
			defer func() {
				if t.Failed() {
					t.Logf("reproduce: go test -run '%s'", confRunPattern(t.Name()))
				}
			}()
			st := &confScope{suiteT: t}
			c.run(st, func() S { return newStore(st) })
		})
	}
}

// confScope is a case's t whose cleanups (the closing of each bundle its
// fresh opened) may also run before the case ends: a model-based check
// closes each run's bundle as the run ends (confModelProp), so that a
// store process that declares reopen serves the next run, rather than one
// process per run waiting for the end of the check. Each cleanup runs
// once, at the latest where it would have run on t. (A *testing.T
// factory registers its cleanups on the *testing.T itself: they run when
// the case ends, as before.)
type confScope struct {
	suiteT
	mu      sync.Mutex
	pending []*confCleanup
}

type confCleanup struct {
	once sync.Once
	f    func()
}

func (s *confScope) Cleanup(f func()) {
	c := &confCleanup{f: f}
	s.mu.Lock()
	s.pending = append(s.pending, c)
	s.mu.Unlock()
	s.suiteT.Cleanup(func() { c.once.Do(c.f) })
}

// release runs the cleanups registered so far, last first.
func (s *confScope) release() {
	s.mu.Lock()
	p := s.pending
	s.pending = nil
	s.mu.Unlock()
	for i := len(p) - 1; i >= 0; i-- {
		p[i].once.Do(p[i].f)
	}
}

// confRelease ends what t's cleanups hold so far (t a case's confScope;
// nothing otherwise).
func confRelease(t suiteT) {
	if s, ok := t.(*confScope); ok {
		s.release()
	}
}

// confRunPattern turns a test name into an anchored -run pattern.
func confRunPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// runPattern narrows the conformance subtests that run, as go test's -run
// does: the pattern "Stores/Behaviour/Locks" is split at each '/', and a
// subtest runs when the name at each level of its path (the suite,
// "Stores" or "PlanSave", first) matches that level's regular expression;
// levels past the pattern's run whole. An empty pattern runs everything.
type runPattern []*regexp.Regexp

// parseRunPattern compiles a go test -run style pattern (a leading "^$/"
// element, for the unnamed top level that conformance failures' replay
// lines start with, is dropped).
func parseRunPattern(s string) (runPattern, error) {
	s = strings.TrimPrefix(s, "^$/")
	if s == "" {
		return nil, nil
	}
	var out runPattern
	for i, part := range strings.Split(s, "/") {
		re, err := regexp.Compile(part)
		if err != nil {
			return nil, fmt.Errorf("run pattern %q, element %d: %w", s, i+1, err)
		}
		out = append(out, re)
	}
	return out, nil
}

func (p runPattern) matches(path []string) bool {
	for i, name := range path {
		if i < len(p) && !p[i].MatchString(name) {
			return false
		}
	}
	return true
}
