package sim_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// recordingFaults is a ServerFaults that counts what the runner asks of
// it and opens no case.
type recordingFaults struct{ opened, direct atomic.Int32 }

func (f *recordingFaults) OpenCase(context.Context, sim.ServerCase) (sim.CaseServers, error) {
	f.opened.Add(1)
	return nil, errors.New("a case that arms no server fault needs no proxy")
}
func (*recordingFaults) Kills(string) int { return 0 }
func (f *recordingFaults) Direct() map[string]string {
	f.direct.Add(1)
	return map[string]string{"postgres": "127.0.0.1:1"}
}

// A case that arms no server fault reaches the servers directly: no
// proxy is opened for it (a proxy only copied its bytes, half the
// supervisor's CPU in a containers matrix), and it asks where the servers
// are now, since a restart may have moved them.
func TestClientSideCaseOpensNoProxy(t *testing.T) {
	f := &recordingFaults{}
	r := processRunner(t, "sqlite", func(c *sim.Config) { c.ServerFaults = f })
	c, ok := catalogue.Lease(250*time.Millisecond).WindowCase(faults.BeforeGraphWrite, faults.Crash)
	if !ok {
		t.Fatal("no crash case at beforeGraphWrite")
	}
	res := r.RunCase(context.Background(), c)
	if res.Verdict != verdict.Pass {
		t.Fatalf("client-side crash case with server faults on: %s %v", res.Verdict, res.Notes)
	}
	if n := f.opened.Load(); n != 0 {
		t.Fatalf("OpenCase asked %d times for a case that arms no server fault", n)
	}
	if n := f.direct.Load(); n != 1 {
		t.Fatalf("Direct asked %d times, want once for the case", n)
	}
}
