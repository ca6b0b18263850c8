package faults

import (
	"context"
	"fmt"
	"runtime"
	"strings"
)

// Store-declared windows.
//
// The catalogue's windows all sit between two store calls of the reference
// service. A store whose one method does more than one durable step (writes
// an operation row, then in a second transaction its plan) has crash windows
// of its own, inside that method, that only its author knows. The author
// marks each with At:
//
//	func (s *Store) CreateIfAbsent(ctx context.Context, op reference.Operation, plan reference.Plan) (bool, error) {
//		if err := s.insertOperation(ctx, op); err != nil {
//			return false, err
//		}
//		err := faults.At(ctx, "mystore/afterOperationRow", func() error { return s.insertPlan(ctx, op, plan) })
//		return err == nil, err
//	}
//
// Outside crashmatrix (no Runtime in ctx) At just runs the step. Under
// crashmatrix the worker puts its Runtime in the context of every service
// call (WithRuntime); a probe run records every store point reached and from
// which store method, and the matrix arms each discovered point with every
// StoreKinds kind, through the process-wide failpoints (armed.go)
// (GO_FAILPOINTS) like the catalogue's windows: nothing but `go test` is
// needed, no code rewriting.

// StoreKinds are the fault kinds the matrix injects at a store-declared
// window: the step after the window does not run (crash, and recrash: the
// re-run crashes there again), runs and then the process dies (unknown),
// fails with a retryable error (error), or runs after a stall past the lease
// (pause).
var StoreKinds = []Kind{Crash, Unknown, Transient, Recrash, Pause}

type runtimeKey struct{}

// WithRuntime returns ctx carrying rt, so that store code reached with that
// context can declare crash windows (At) at which rt injects faults.
func WithRuntime(ctx context.Context, rt *Runtime) context.Context {
	if rt == nil {
		return ctx
	}
	return context.WithValue(ctx, runtimeKey{}, rt)
}

// RuntimeFrom returns the Runtime WithRuntime put in ctx, or nil.
func RuntimeFrom(ctx context.Context) *Runtime {
	rt, _ := ctx.Value(runtimeKey{}).(*Runtime)
	return rt
}

// Reach is one pass of execution through a store-declared window, for the
// probe run that discovers a store's windows.
type Reach struct {
	Point Point
	// Method is the store function that declared the window (its package
	// and name, e.g. "mystore.(*OperationStore).CreateIfAbsent").
	Method string
}

// IsStorePoint reports whether p names a store-declared window rather than
// one of the catalogue's: store point names are "<store>/<window>".
func IsStorePoint(p Point) bool { return strings.Contains(string(p), "/") }

// ValidateStorePoint checks a store window's name: "<store>/<window>", each
// part letters, digits, '_', '-' or '.', and not a catalogue name.
func ValidateStorePoint(p Point) error {
	store, window, ok := strings.Cut(string(p), "/")
	if !ok || store == "" || window == "" || strings.Contains(window, "/") {
		return fmt.Errorf("store window %q: want \"<store>/<window>\", e.g. \"mystore/afterOperationRow\"", p)
	}
	for _, r := range string(p) {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.' || r == '/') {
			return fmt.Errorf("store window %q: character %q not allowed (letters, digits, '_', '-', '.')", p, r)
		}
	}
	return nil
}

// At marks a crash window inside store code: step is the durable step that
// follows the window, and it runs under whatever fault crashmatrix armed at
// p (the step does not run and the process dies; it runs and then the
// process dies; it fails with an *InjectedError; it runs after a stall).
// Without a Runtime in ctx it only runs step. A malformed name is an error
// (and step does not run), so a store author sees it in the first test.
func At(ctx context.Context, p Point, step func() error) error {
	rt := RuntimeFrom(ctx)
	if rt == nil {
		return step()
	}
	if err := ValidateStorePoint(p); err != nil {
		return fmt.Errorf("faults.At: %w", err)
	}
	if rt.OnReach != nil {
		rt.OnReach(Reach{Point: p, Method: callerMethod(2)})
	}
	return rt.At(ctx, p, step)
}

// callerMethod names the function skip frames up (1 = the caller of
// callerMethod), without its module path and without the suffixes of
// closures, so a window declared inside a transaction callback is named by
// the store method that runs it.
func callerMethod(skip int) string {
	pc, _, _, ok := runtime.Caller(skip)
	if !ok {
		return "?"
	}
	fn := runtime.FuncForPC(pc)
	if fn == nil {
		return "?"
	}
	return shortFuncName(fn.Name())
}

// shortFuncName turns "example.com/x/mystore.(*Ops).Create.func1.2" into
// "mystore.(*Ops).Create".
func shortFuncName(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	parts := strings.Split(name, ".")
	for len(parts) > 2 {
		last := parts[len(parts)-1]
		if strings.HasPrefix(last, "func") || isDigits(last) || last == "deferwrap1" {
			parts = parts[:len(parts)-1]
			continue
		}
		break
	}
	return strings.Join(parts, ".")
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
