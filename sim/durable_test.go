package sim_test

import (
	"context"
	"testing"

	"github.com/crashmatrix/crashmatrix/faults/lazyfs"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// The embedded default (SQLite in WAL mode, in the worker process) is
// watched like a store process: the probe sees one WAL sync in each of
// its write calls, made by the worker itself, so no call has a gap inside
// and the durable-step sweep adds no case. In process mode only: the
// in-process mode has no lazy mount and no probe of durable steps.
func TestDurableProbeOfTheEmbeddedDefault(t *testing.T) {
	if err := lazyfs.Available(); err != nil {
		t.Fatal(sim.PowerLossNotTested(err.Error()))
	}
	pr, err := processRunner(t, "sqlite", nil).Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]bool{}
	for _, c := range pr.Durable {
		methods[c.Method] = true
		if len(c.Ops) != 1 {
			t.Errorf("store call %d (%s) took durable steps %q, want one WAL sync", c.Call, c.Method, c.Ops)
		}
	}
	for _, m := range []string{"ops.create", "ops.cas", "states.cas", "graph.apply", "locks.tryAcquire"} {
		if !methods[m] {
			t.Errorf("the probe saw no durable step of %s: %+v", m, pr.Durable)
		}
	}
	if cs := catalogue.DurableStepCases(pr.Durable); len(cs) != 0 {
		t.Errorf("the sweep of the embedded default has %d cases, want none", len(cs))
	}
	in, err := processRunner(t, "sqlite", func(c *sim.Config) { c.InProcess = true }).Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Durable) != 0 {
		t.Errorf("the in-process probe counted durable steps: %+v", in.Durable)
	}
}
