package reference

import (
	"fmt"
	"runtime"
	"testing"
)

// A memo's first entries cost what they hold, not a table sized for
// memoEntries: a worker process puts a few plans and states and exits,
// and a map sized up front took 110 KB at the first plan's put. The
// memo still holds up to memoEntries entries and then starts afresh.
func TestMemoGrowsAsEntriesCome(t *testing.T) {
	var m memo[Plan]
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m.put([]byte("p"), Plan{OperationID: "op"}, "fp")
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<10 {
		t.Fatalf("the first put allocated %d bytes", n)
	}
	if p, fp, ok := m.get([]byte("p")); !ok || p.OperationID != "op" || fp != "fp" {
		t.Fatalf("get after put: %+v %q %v", p, fp, ok)
	}
	for i := range memoEntries {
		m.put([]byte(fmt.Sprint(i)), Plan{}, "")
	}
	if _, _, ok := m.get([]byte("p")); ok || len(m.m) != 1 {
		t.Fatalf("after %d more puts: the first still there %v, %d entries, want a fresh start", memoEntries, ok, len(m.m))
	}
}
