package scenarios

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// A case of a fault that holds a request past the lease (server-pause,
// partition, clock-jump) is written as a scenario file and read back as
// the same case: what a run found replays.
func TestServerHoldCasesRoundTrip(t *testing.T) {
	for _, k := range faults.ServerOptInKinds {
		c, ok := catalogue.Lease(600*time.Millisecond).ServerWindowCase(faults.BeforeStateCommit, k, "postgres")
		if !ok {
			t.Fatalf("no %s case at beforeStateCommit", k)
		}
		s, err := FromCase(c)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		s.Expect = Expect{Verdict: ExpectPass}
		b, err := s.Marshal()
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if !strings.Contains(string(b), "kind: "+string(k)) || !strings.Contains(string(b), "background: true") {
			t.Fatalf("%s: the scenario does not arm the fault in a background worker:\n%s", k, b)
		}
		back, err := Parse(string(k)+".yaml", b)
		if err != nil {
			t.Fatalf("%s: the written scenario does not parse: %v\n%s", k, err, b)
		}
		got := back.Case()
		if !reflect.DeepEqual(got.Steps[0].Arms, c.Steps[0].Arms) || got.Steps[0].Background != c.Steps[0].Background {
			t.Fatalf("%s: read back arms %v (background %v), want %v (background %v)", k, got.Steps[0].Arms, got.Steps[0].Background, c.Steps[0].Arms, c.Steps[0].Background)
		}
	}
	// Neo4j holds only the graph: a hold there applies before graph
	// writes; a clock jump, never (the leases are on PostgreSQL).
	bad := strings.Replace(powerScenario(faults.PowerLoss, `""`, "pass", ""), "{point: beforeCompleted, kind: power-loss, hit: 2}", "{point: beforeCompleted, kind: partition, server: neo4j}", 1)
	if _, err := Parse("bad.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), "partition fault against neo4j does not apply at beforeCompleted") {
		t.Fatalf("partition against neo4j at beforeCompleted: %v", err)
	}
	if _, ok := catalogue.Lease(600*time.Millisecond).ServerWindowCase(faults.BeforeGraphWrite, faults.ClockJump, "neo4j"); ok {
		t.Fatal("a clock-jump case against neo4j")
	}
}
