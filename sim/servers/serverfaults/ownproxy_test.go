package serverfaults

import (
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults"
)

// A worker with proxies of its own has every connection there held by a
// partition, one it opens during the partition too (on the case's proxy
// such a connection would pass: the proxy cannot tell whose it is), while
// another worker, on the case's proxy, reaches the server and commits;
// the late connection's request arrives once the partition heals.
func TestPartitionHoldsConnectionsTheWorkerOpensDuringIt(t *testing.T) {
	fake := newLineServer(t)
	c, _ := holdCase(t, &Server{Name: "postgres", Protocol: "postgres", Addr: fake.ln.Addr().String()})
	own, err := c.WorkerEndpoints("fault")
	if err != nil {
		t.Fatal(err)
	}
	if own["postgres"] == c.Endpoints()["postgres"] || own["control"] != c.Endpoints()["control"] {
		t.Fatalf("own endpoints %v, the case's %v: want another proxy, the same control URL", own, c.Endpoints())
	}
	holder := dial(t, own["postgres"])
	roundTrip(t, holder, "holder-before")
	armAt(t, c, faults.Partition)
	late := dial(t, own["postgres"]) // opened during the partition
	replied := sendAsync(late, "late-commit")
	if rs := waitRecords(t, c, 1); rs[0].Err != "" {
		t.Fatalf("record %+v: want the partition in effect", rs[0])
	}
	noReplyYet(t, replied, "during the partition, on a connection opened during it")
	if l := fake.lines(); len(l) != 1 {
		t.Fatalf("server saw %v during the partition: the late connection's request must be held", l)
	}
	other := dial(t, c.Endpoints()["postgres"])
	roundTrip(t, other, "other-commit")
	release(t, c)
	if err := <-replied; err != nil {
		t.Fatalf("the late connection's reply after the partition healed: %v", err)
	}
	if l := fake.lines(); strings.Join(l, ",") != "holder-before,other-commit,late-commit" {
		t.Fatalf("server saw %v: want the late connection's request after the other worker's commit", l)
	}
	hasAll(t, waitRecords(t, c, 2)[1].Note, "another connection committed a write (UPDATE 1)")
}
