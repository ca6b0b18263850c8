package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// PathPrefix is the failpoint path prefix of every Point.
const PathPrefix = "github.com/crashmatrix/crashmatrix/faults/"

// Path returns the failpoint path of p, as used by EnableFailpoint and
// GO_FAILPOINTS (pingcap/failpoint's syntax: armed.go).
func Path(p Point) string { return PathPrefix + string(p) }

// Action is an armed fault: what to do, and at which hit of the point.
type Action struct {
	Kind Kind
	// Hit is the 1-based hit of the point at which the fault fires; 0 means
	// every hit.
	Hit int
	// PauseFor is how long a Pause stalls.
	PauseFor time.Duration
	// Server is the server a server fault targets ("postgres", "neo4j").
	Server string
	// Tear is what a TornWrite keeps or loses whole, in bytes: 0 for a
	// 4 KiB page (TearPage, never written out), a 512-byte disk sector
	// (TearSector), or a smaller power of two down to one byte (a tear
	// inside one sector). TearUnit gives it in bytes.
	Tear int
}

// The units a torn write tears at (Action.Tear; lazyfs.PageSize and
// lazyfs.SectorSize): a 4 KiB page, as the page cache writes it back, a
// 512-byte disk sector, as a disk writes it, and, below a sector, any
// power of two down to a single byte (TearByte): a disk that does not
// write a sector whole, where any byte of a sector being written may be
// old or new when the power goes.
const (
	TearPage   = 4096
	TearSector = 512
	TearByte   = 1
)

// CheckTear says why n is no unit a torn write tears at: a power of two
// from TearByte to TearPage (nil when it is one).
func CheckTear(n int) error {
	if n < TearByte || n > TearPage || n&(n-1) != 0 {
		return fmt.Errorf("tear %d: want %d (4 KiB pages), %d (disk sectors) or a smaller power of two down to %d (a tear inside one sector)", n, TearPage, TearSector, TearByte)
	}
	return nil
}

// ActionTear is a tear unit as Action.Tear holds it: 0 for TearPage, the
// default, and any smaller unit as it is.
func ActionTear(unit int) int {
	if unit == TearPage {
		return 0
	}
	return unit
}

// TearUnit is the unit, in bytes, a torn write of a tears at: TearPage
// unless Tear names a smaller one.
func (a Action) TearUnit() int {
	if a.Tear == 0 {
		return TearPage
	}
	return a.Tear
}

// TearName says what a torn write at unit bytes keeps or loses whole:
// "4 KiB pages", "512-byte sectors", "64-byte pieces of a sector",
// "single bytes".
func TearName(unit int) string {
	switch {
	case unit == 0 || unit == TearPage:
		return "4 KiB pages"
	case unit == TearSector:
		return "512-byte sectors"
	case unit == TearByte:
		return "single bytes"
	case unit < TearSector:
		return fmt.Sprintf("%d-byte pieces of a sector", unit)
	}
	return fmt.Sprintf("%d-byte pieces of a page", unit)
}

// String renders the action in the form ParseAction reads:
// kind[:pauseMillis|:server|:512][@hit].
func (a Action) String() string {
	s := string(a.Kind)
	if a.Kind == Pause {
		s += ":" + strconv.FormatInt(a.PauseFor.Milliseconds(), 10)
	}
	if a.Kind == TornWrite && a.Tear != 0 && a.Tear != TearPage {
		s += ":" + strconv.Itoa(a.Tear)
	}
	if a.Kind.IsServer() {
		s += ":" + a.Server
	}
	if a.Hit > 0 {
		s += "@" + strconv.Itoa(a.Hit)
	}
	return s
}

// On arms kind at the hit-th hit of a point (0: every hit).
func On(kind Kind, hit int) Action { return Action{Kind: kind, Hit: hit} }

// PauseOn arms a pause of d at the hit-th hit of a point.
func PauseOn(d time.Duration, hit int) Action { return Action{Kind: Pause, Hit: hit, PauseFor: d} }

// MarshalText renders the action as String does, so an Action is a
// string in JSON and YAML (worker specs, scenario files).
func (a Action) MarshalText() ([]byte, error) {
	if a.Kind == "" {
		return nil, fmt.Errorf("fault action without a kind")
	}
	return []byte(a.String()), nil
}

// UnmarshalText parses the ParseAction form.
func (a *Action) UnmarshalText(b []byte) error {
	v, err := ParseAction(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// ParseAction parses "crash", "crash@2", "pause:1500@1", "torn-write:512"
// and the like.
func ParseAction(s string) (Action, error) {
	var a Action
	body := s
	if i := strings.LastIndexByte(body, '@'); i >= 0 {
		n, err := strconv.Atoi(body[i+1:])
		if err != nil || n < 1 {
			return a, fmt.Errorf("fault action %q: hit after '@' must be a positive integer", s)
		}
		a.Hit = n
		body = body[:i]
	}
	kind, arg, hasArg := strings.Cut(body, ":")
	k, err := ParseKind(kind)
	if err != nil {
		return a, fmt.Errorf("fault action %q: %w", s, err)
	}
	a.Kind = k
	if k == Pause {
		ms := int64(1000)
		if hasArg {
			ms, err = strconv.ParseInt(arg, 10, 64)
			if err != nil || ms < 0 {
				return a, fmt.Errorf("fault action %q: pause takes milliseconds, got %q", s, arg)
			}
		}
		a.PauseFor = time.Duration(ms) * time.Millisecond
	} else if k.IsServer() {
		a.Server = "postgres"
		if hasArg {
			if !slices.Contains(Servers, arg) {
				return a, fmt.Errorf("fault action %q: kind %s targets a server, one of %v, got %q", s, k, Servers, arg)
			}
			a.Server = arg
		}
	} else if k == TornWrite && hasArg {
		n, err := strconv.Atoi(arg)
		if err == nil {
			err = CheckTear(n)
		}
		if err != nil {
			return a, fmt.Errorf("fault action %q: torn-write tears at %d-byte pages (the default), %d-byte sectors or a smaller power of two down to %d byte, got %q", s, TearPage, TearSector, TearByte, arg)
		}
		a.Tear = ActionTear(n)
	} else if hasArg {
		return a, fmt.Errorf("fault action %q: kind %s takes no argument", s, k)
	}
	return a, nil
}

// Injector decides whether a fault fires when execution reaches a point.
// Implementations count hits themselves.
type Injector interface {
	Eval(p Point) (Action, bool)
}

// Failpoints is the Injector backed by the process-wide failpoints
// (armed.go): arm a point with EnableFailpoint(Path(p), `return("crash@1")`)
// or the GO_FAILPOINTS environment variable. No code rewriting is needed.
type Failpoints struct {
	mu   sync.Mutex
	hits map[Point]int
}

// Eval implements Injector.
func (f *Failpoints) Eval(p Point) (Action, bool) {
	s, ok := armedValue(Path(p))
	if !ok {
		return Action{}, false
	}
	a, err := ParseAction(s)
	if err != nil {
		// A malformed arming is a harness bug: fail loudly at the point.
		panic(fmt.Sprintf("failpoint %s: %v", p, err))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hits == nil {
		f.hits = map[Point]int{}
	}
	f.hits[p]++
	if a.Hit != 0 && f.hits[p] != a.Hit {
		return Action{}, false
	}
	return a, true
}

// Arms are the faults armed in one worker: at most one action per point.
type Arms map[Point]Action

// EnvValue renders an arming for GO_FAILPOINTS: "path=return(\"crash@1\")",
// points in sorted order so the same arms give the same value.
func EnvValue(arms Arms) string {
	points := make([]Point, 0, len(arms))
	for p := range arms {
		points = append(points, p)
	}
	sort.Slice(points, func(i, j int) bool { return points[i] < points[j] })
	parts := make([]string, 0, len(arms))
	for _, p := range points {
		a := arms[p]
		parts = append(parts, fmt.Sprintf("%s=return(%q)", Path(p), a.String()))
	}
	return strings.Join(parts, ";")
}

// Schedule is an in-process Injector: a fixed set of armed points, with hit
// counting local to the schedule (no global state), so many simulated runs
// can proceed in one process at once.
type Schedule struct {
	mu   sync.Mutex
	arms map[Point][]Action
	hits map[Point]int
}

// NewSchedule returns a Schedule with the given armings.
func NewSchedule() *Schedule {
	return &Schedule{arms: map[Point][]Action{}, hits: map[Point]int{}}
}

// Arm adds an action at p.
func (s *Schedule) Arm(p Point, a Action) {
	s.mu.Lock()
	s.arms[p] = append(s.arms[p], a)
	s.mu.Unlock()
}

// Disarm removes every arming (faults stop).
func (s *Schedule) Disarm() { s.mu.Lock(); s.arms = map[Point][]Action{}; s.mu.Unlock() }

// Eval implements Injector.
func (s *Schedule) Eval(p Point) (Action, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	acts := s.arms[p]
	if len(acts) == 0 {
		return Action{}, false
	}
	s.hits[p]++
	n := s.hits[p]
	for _, a := range acts {
		if a.Hit == 0 || a.Hit == n {
			return a, true
		}
	}
	return Action{}, false
}

// Hits returns how many times p was reached while it was armed.
func (s *Schedule) Hits(p Point) int { s.mu.Lock(); defer s.mu.Unlock(); return s.hits[p] }

// Hit is one fault that fired.
type Hit struct {
	Point  Point
	Action Action
}

// Runtime executes protocol steps under fault injection. The zero value
// (and a nil *Runtime) injects nothing.
type Runtime struct {
	// Injector decides which faults fire; nil injects nothing.
	Injector Injector
	// OnHit is called when a fault fires, before it acts (so a worker can
	// durably report the hit before it dies).
	OnHit func(Hit)
	// Crash ends the process (or the simulated process). It must not return.
	Crash func(Hit)
	// Sleep stalls for a Pause; time.Sleep when nil.
	Sleep func(context.Context, time.Duration)
	// Server carries out a server fault (server-crash, ack-lost,
	// conn-reset) before the step runs: the supervisor kills and restarts
	// the server, or arms the fault proxy in front of it. It returns once
	// that is done; the step then runs against the faulted server.
	Server func(context.Context, Hit) error
	// Disk arms a disk error (fsync-error, disk-full, slow-sync) on the
	// mount that holds the worker's stores, before the step runs: the
	// supervisor serving the mount arms it on the worker's next file
	// operation. The step then runs on the faulted disk.
	Disk func(context.Context, Hit) error
	// OnReach, when set, is told every pass through a store-declared
	// window (At), armed or not: the probe run discovers a store's windows
	// from it.
	OnReach func(Reach)

	mu    sync.Mutex
	lease Kind // a lease fault armed for the step running now
	// fenced counts the fenced steps (FencedSteps) running now: StoreCall
	// does not fire inside them (storecall.go).
	fenced int
	// passed counts the passes through At by point, armed or not.
	passed map[Point]int
}

// Passed is how often execution passed point p through At, armed or not
// (StoreCall: the store calls outside fenced steps, the hit count a
// "crash@k" there counts in): what a random kill is drawn over.
func (r *Runtime) Passed(p Point) int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.passed[p]
}

// LeaseFault returns the lease fault (Split or Expire) that fired at the
// point of the step running now, once: the lock provider wrapper that
// acts on it calls it inside the step.
func (r *Runtime) LeaseFault() (Kind, bool) {
	if r == nil {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.lease
	r.lease = ""
	return k, k != ""
}

// InjectedError is the error a Transient or Permanent fault returns.
type InjectedError struct {
	Point     Point
	Retryable bool
}

func (e *InjectedError) Error() string {
	if e.Retryable {
		return fmt.Sprintf("injected transient fault at %s", e.Point)
	}
	return fmt.Sprintf("injected permanent fault at %s", e.Point)
}

// IsInjected reports whether err carries an injected fault.
func IsInjected(err error) bool {
	var ie *InjectedError
	return errors.As(err, &ie)
}

// At runs step, the protocol step that follows point p, under whatever fault
// is armed at p.
func (r *Runtime) At(ctx context.Context, p Point, step func() error) error {
	if r == nil || r.Injector == nil {
		return step()
	}
	if p == StoreCall && r.inFencedStep() {
		return step()
	}
	if isFenced(p) {
		step = r.fencing(step)
	}
	r.mu.Lock()
	if r.passed == nil {
		r.passed = map[Point]int{}
	}
	r.passed[p]++
	r.mu.Unlock()
	a, ok := r.Injector.Eval(p)
	if !ok {
		return step()
	}
	h := Hit{Point: p, Action: a}
	if r.OnHit != nil {
		r.OnHit(h)
	}
	switch a.Kind {
	case Crash, Recrash, PowerLoss, TornWrite:
		// A power loss ends the worker as a crash does; the supervisor
		// then kills the case's other processes and cuts the power.
		r.crash(h)
	case Transient:
		return &InjectedError{Point: p, Retryable: true}
	case Permanent, Persistent:
		return &InjectedError{Point: p, Retryable: false}
	case Split, Expire:
		r.mu.Lock()
		r.lease = a.Kind
		r.mu.Unlock()
		err := step()
		r.mu.Lock()
		r.lease = ""
		r.mu.Unlock()
		return err
	case Unknown:
		_ = step()
		r.crash(h)
	case Pause:
		if r.Sleep != nil {
			r.Sleep(ctx, a.PauseFor)
		} else {
			t := time.NewTimer(a.PauseFor)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		return step()
	case ServerCrash, AckLost, ConnReset, ServerPause, Partition, ClockJump:
		if r.Server == nil {
			panic(fmt.Sprintf("fault %s fired at %s but this worker cannot reach a server supervisor (a server fault needs a server backend run by the supervisor)", a, p))
		}
		if err := r.Server(ctx, h); err != nil {
			// The harness could not carry out the fault: a harness
			// failure, not a store error the service should handle.
			panic(fmt.Sprintf("fault %s at %s: %v", a, p, err))
		}
		return step()
	case FsyncError, DiskFull, SlowSync:
		if r.Disk == nil {
			panic(fmt.Sprintf("fault %s fired at %s but this worker's stores are on no lazy mount (a disk error needs worker processes whose stores keep their files in the case's directory)", a, p))
		}
		if err := r.Disk(ctx, h); err != nil {
			panic(fmt.Sprintf("fault %s at %s: %v", a, p, err))
		}
		return step()
	}
	return step()
}

func (r *Runtime) crash(h Hit) {
	if r.Crash == nil {
		panic(fmt.Sprintf("fault %s fired at %s but no Crash handler is set", h.Action, h.Point))
	}
	r.Crash(h)
	panic("faults: Crash handler returned")
}
