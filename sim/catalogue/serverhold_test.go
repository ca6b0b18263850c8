package catalogue_test

import (
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// The faults that hold a request past the lease are opt-in: the default
// server matrix has none of them, ServerOptInMatrix only those asked for,
// each with its worker in the background (the case's next worker runs
// while it is held) and, for clock-jump, a competitor for its document.
func TestServerOptInKindsOnlyWhenAsked(t *testing.T) {
	for _, c := range catalogue.Lease(600 * time.Millisecond).ServerMatrix() {
		if c.Kind.HoldsPastLease() {
			t.Fatalf("the default server matrix has %s", c.Label())
		}
	}
	cases := catalogue.Lease(600 * time.Millisecond).ServerOptInMatrix([]faults.Kind{faults.Partition})
	count := map[string]int{}
	for _, c := range cases {
		if c.Kind != faults.Partition {
			t.Fatalf("asked for partition, got %s", c.Label())
		}
		count[c.Server]++
		if !c.Steps[0].Background && !(len(c.Steps) > 1 && c.Steps[1].Background) {
			t.Errorf("%s: the faulted worker does not run in the background", c.Label())
		}
	}
	// The pause kind's 11 windows of System A on PostgreSQL; Neo4j before
	// its graph writes.
	if count["postgres"] != 11 || count["neo4j"] != 2 {
		t.Fatalf("partition cases per server %v, want postgres 11, neo4j 2", count)
	}
	jump := catalogue.Lease(600 * time.Millisecond).ServerOptInMatrix([]faults.Kind{faults.ClockJump})
	if len(jump) != 11 {
		t.Fatalf("%d clock-jump cases, want 11 (PostgreSQL only)", len(jump))
	}
	for _, c := range jump {
		found := false
		for _, st := range c.Steps {
			found = found || st.Worker == "competitor"
		}
		if !found || c.Server != "postgres" {
			t.Errorf("%s: no competitor, or not on PostgreSQL", c.Label())
		}
	}
}
