package plansave_test

import (
	"io"
	"sync"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference/plansave"
	"github.com/crashmatrix/crashmatrix/reference/plansave/plansavetest"
)

// The workflow on the in-memory stores; adapters/sqlite and
// adapters/postgres run the same suite on theirs.
func TestMemoryStores(t *testing.T) {
	plansavetest.TestStores(t, func(*testing.T) plansavetest.Stores { return plansave.NewMemory() })
}

// The crash scenarios exercise the workflow itself on a memory store that
// a "restarted process" finds as it was (one instance per directory): what
// a durable store keeps across a real restart is its own suite's concern.
// Memory has no unique-less mutant, so that scenario is left to the
// durable stores.
func TestWorkflowCrashRecovery(t *testing.T) {
	var mu sync.Mutex
	kept := map[string]*plansave.Memory{}
	plansavetest.TestCrashRecovery(t, func(t *testing.T, dir string, unique bool) (plansavetest.Stores, io.Closer) {
		if !unique {
			t.Skip("plansave.Memory has no mutant without the unique constraint")
		}
		mu.Lock()
		defer mu.Unlock()
		if kept[dir] == nil {
			kept[dir] = plansave.NewMemory()
		}
		return kept[dir], io.NopCloser(nil)
	})
}
