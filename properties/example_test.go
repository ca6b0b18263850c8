package properties_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/memory"
	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/reference"
)

// keptForever is a deliberately broken lock provider: every lease it
// grants lasts for ever.
type keptForever struct{ reference.LockProvider }

func (p keptForever) TryAcquire(ctx context.Context, space, doc, holder string, now, ttl int64) (reference.Lease, bool, error) {
	return p.LockProvider.TryAcquire(ctx, space, doc, holder, now, 1<<50)
}

// A negative control of the conformance suite: the broken lock provider
// must fail the subtest that hands an expired lease over, and the correct
// one nothing.
func ExampleStoresFailures() {
	broken := properties.StoresFailures(func(string, string) (reference.Stores, error) {
		st := memory.New(memory.Options{})
		st.Locks = keptForever{st.Locks}
		return st, nil
	})
	msg, caught := broken["LockProvider/ExpiryHandsOverWithGreaterToken"]
	fmt.Println("broken lock provider caught:", caught, msg != "")

	correct := properties.StoresFailures(func(string, string) (reference.Stores, error) { return memory.New(memory.Options{}), nil })
	fmt.Println("failures of the correct stores:", len(correct))
	// Output:
	// broken lock provider caught: true true
	// failures of the correct stores: 0
}

// A negative control of the crash matrix, in a store's own test file: the
// test passes only if the run breaks I7, and it can look at what I7 said.
// (It needs a *testing.T and re-executes the test binary as its workers,
// so this example is compiled, not run.)
func ExampleCertifyCrashSafety_negativeControl() {
	testBrokenLeasesAreCaught := func(t *testing.T) {
		res := properties.CertifyCrashSafety(t, properties.Backend{
			Name: "sqlite-leases-kept-forever",
			Open: func(_ context.Context, env properties.CaseEnv) (reference.Stores, error) {
				if err := os.MkdirAll(env.Dir, 0o755); err != nil {
					return reference.Stores{}, err
				}
				st, err := sqlite.Open(filepath.Join(env.Dir, "store.db"), sqlite.Options{})
				st.Locks = keptForever{st.Locks}
				return st, err
			},
		}, properties.CrashOptions{ExpectBroken: []string{"I7"}})
		for _, c := range res.Results {
			for _, v := range c.Violations {
				t.Logf("%s: %s", c.Case.ID, v)
			}
		}
	}
	_ = testBrokenLeasesAreCaught
}
