package properties

import (
	"fmt"
	"hash/fnv"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/crashmatrix/crashmatrix/reference"
)

// The subtest names of the Concurrency suite: each runs concurrent
// clients (writers and readers at once) against one store and checks the
// recorded history for linearizability against a sequential model with
// porcupine.
const (
	subLinOperations = "OperationsLinearizable" // create, stage CAS, Get and GetPlan: never an operation without its plan
	subLinStates     = "StatesLinearizable"     // revision CAS, version rows, reads by operationId
	subLinLeases     = "LeasesLinearizable"     // acquire, renew, release with expiry: never two live holders
	subLinGraph      = "GraphLinearizable"      // concurrent mutations and reads: all of a mutation or none
)

// linRounds is how many times each linearizability check runs.
const linRounds = 3

// runConcurrency runs the linearizability checks of every store the bundle
// has.
func runConcurrency(t suiteT, opened func(t suiteT) reference.Stores) {
	t.Helper()
	probe := opened(t)
	for _, c := range []struct {
		name string
		has  bool
		run  func(t suiteT, st reference.Stores, space string)
	}{
		{subLinOperations, probe.Ops != nil, linOperations},
		{subLinStates, probe.States != nil, linStates},
		{subLinLeases, probe.Locks != nil, linLeases},
		{subLinGraph, probe.Writer != nil, linGraph},
	} {
		t.Run(c.name, func(t suiteT) {
			if !c.has {
				t.Skipf("the bundle has no store for %s", c.name)
			}
			defer func() {
				if t.Failed() {
					t.Logf("reproduce: go test -run '%s'", confRunPattern(t.Name()))
				}
			}()
			// A few rounds on fresh keys: a race window is hit by chance,
			// so more rounds catch more; the first failing round stops.
			st := opened(t)
			for round := 1; round <= linRounds && !t.Failed(); round++ {
				c.run(t, st, fmt.Sprintf("space_lin%d", round))
			}
		})
	}
}

// linHistory records a concurrent history for porcupine: each call's
// input, output and the times it was invoked and returned.
type linHistory struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func newLinHistory() *linHistory { return &linHistory{start: time.Now()} }

// call runs f as client's operation with input in, recording its output.
func (h *linHistory) call(client int, in any, f func() any) any {
	call := time.Since(h.start).Nanoseconds()
	out := f()
	ret := time.Since(h.start).Nanoseconds()
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
	h.mu.Unlock()
	return out
}

// linClients runs n clients at once.
func linClients(n int, body func(client int)) {
	confRace(n, func(i int) struct{} { body(i); return struct{}{} })
}

// linPace spaces a reader's calls out a little, so that its reads spread
// over the writers' whole run (and land in their windows) instead of
// bursting before the writers get going.
func linPace() { time.Sleep(10 * time.Microsecond) }

// linCheck checks the history against model and fails t with the
// operations of the key that has no linearization and a porcupine
// visualisation to open.
func linCheck(t suiteT, what string, model porcupine.Model, h *linHistory) {
	t.Helper()
	model.Hash = func(s any) uint64 {
		f := fnv.New64a()
		fmt.Fprint(f, model.DescribeState(s))
		return f.Sum64()
	}
	res, info := porcupine.CheckOperationsVerbose(model, h.ops, 20*time.Second)
	switch res {
	case porcupine.Ok:
		return
	case porcupine.Unknown:
		t.Errorf("%s: the linearizability check of %d operations timed out (verdict unknown)", what, len(h.ops))
		return
	}
	where := ""
	if len(h.ops) > 20000 {
		where = " (too many operations for a visualisation)"
	} else if f, err := os.CreateTemp(linVisDir(t), "crashmatrix-linearizability-*.html"); err == nil {
		if porcupine.Visualize(model, info, f) == nil {
			where = "\nporcupine visualisation (open in a browser): " + f.Name()
		}
		f.Close()
	}
	t.Errorf("%s: the history of %d concurrent operations is not linearizable: no order of the calls explains what the readers saw%s\n%s",
		what, len(h.ops), where, linIllegalPart(model, h.ops))
}

// linVisDir is where a visualisation goes: the system temporary directory
// (kept for a person to open), or a recorder's own (removed with it).
func linVisDir(t suiteT) string {
	if s, ok := t.(*confScope); ok {
		t = s.suiteT
	}
	if r, ok := t.(*recorder); ok {
		return r.TempDir()
	}
	return ""
}

// linIllegalPart lists, in call order, the operations of the first key
// (partition) that has no linearization.
func linIllegalPart(model porcupine.Model, ops []porcupine.Operation) string {
	parts := [][]porcupine.Operation{ops}
	if model.Partition != nil {
		parts = model.Partition(ops)
	}
	for _, p := range parts {
		if porcupine.CheckOperations(model, p) {
			continue
		}
		sorted := append([]porcupine.Operation(nil), p...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
		var b strings.Builder
		for i, o := range sorted {
			if i == 60 {
				fmt.Fprintf(&b, "  … %d more\n", len(sorted)-i)
				break
			}
			fmt.Fprintf(&b, "  client %d [%7d µs, %7d µs] %s\n", o.ClientId, o.Call/1000, o.Return/1000, model.DescribeOperation(o.Input, o.Output))
		}
		return b.String()
	}
	return ""
}

// linPartition splits a history by the key its inputs name.
func linPartition[I interface{ key() string }](ops []porcupine.Operation) [][]porcupine.Operation {
	by := map[string][]porcupine.Operation{}
	var keys []string
	for _, o := range ops {
		k := o.Input.(I).key()
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], o)
	}
	sort.Strings(keys)
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, by[k])
	}
	return out
}

func linErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// ---------------------------------------------------------------------------
// OperationStore: several creators race on each operationId (one plan each),
// an advancer walks the stages with CAS, readers Get and GetPlan all along.
