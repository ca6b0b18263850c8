package explorerun

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/explore"
)

// realReplays is how many times a finding of --sim-store is run on the
// real store.
const realReplays = 10

// realReplay is what a finding of the simulated store did on the real one.
type realReplay struct {
	Invariant          string
	Reproduced, Reruns int
	// Original is set when the shrunk schedule never broke the invariant
	// on the real store and the original, unshrunk one did.
	Original bool
	// Moved, when set, says how a stall before the k-th store call was
	// moved for the real store, which counts its calls differently.
	Moved string
	// Case is the schedule that broke the invariant on the real store
	// (the scenario file is written from it), if one did.
	Case *catalogue.Case
}

func (r realReplay) String() string {
	switch {
	case r.Reproduced > 0 && !r.Original && r.Moved == "":
		return fmt.Sprintf("Found on the simulated durable store (--sim-store) and replayed on the real store (SQLite, in-process): breaks %s there in %d of %d runs.", r.Invariant, r.Reproduced, r.Reruns)
	case r.Reproduced > 0 && r.Moved != "":
		return fmt.Sprintf("Found on the simulated durable store (--sim-store) and replayed on the real store (SQLite, in-process) with %s (the stores count their calls differently): breaks %s there in %d of %d runs.", r.Moved, r.Invariant, r.Reproduced, r.Reruns)
	case r.Reproduced > 0:
		return fmt.Sprintf("Found on the simulated durable store (--sim-store): the shrunk schedule never broke %s on the real store (SQLite, in-process) in %d runs, the original schedule did in %d of %d.", r.Invariant, r.Reruns, r.Reproduced, r.Reruns)
	}
	return fmt.Sprintf("A finding of the simulated durable store (--sim-store) only: neither the shrunk nor the original schedule (nor the shrunk one with its store-call stalls moved by up to %d calls) broke %s on the real store (SQLite, in-process) in %d runs each; it may be an artefact of the model.", maxStallShift, r.Invariant, r.Reruns)
}

// maxStallShift is how far a stall before the k-th store call is moved
// when a finding of the simulated store is replayed on the real one.
const maxStallShift = 3

// replayOnRealStore runs a finding of the simulated store on the real one
// (cfg: the in-process SQLite runner explore would have used): the shrunk
// schedule realReplays times; when it never breaks the invariant there,
// the shrunk schedule with each stall before the k-th store call moved to
// k±1..k±maxStallShift (the simulated store is one call per method, a real
// store may count its calls otherwise: the same stall has another k), the
// first that breaks it once counted over realReplays runs; and last the
// original schedule as many times.
func replayOnRealStore(ctx context.Context, cfg sim.Config, f *explore.Finding) (realReplay, error) {
	dir, err := os.MkdirTemp(cfg.WorkDir, "real-store-")
	if err != nil {
		return realReplay{}, err
	}
	defer os.RemoveAll(dir)
	cfg.WorkDir = dir
	runner, err := sim.NewRunner(cfg)
	if err != nil {
		return realReplay{}, fmt.Errorf("replaying the finding on the real store: %w", err)
	}
	defer runner.CloseShared()
	rr := realReplay{Invariant: f.Invariant, Reruns: realReplays}
	breaks := func(c catalogue.Case) bool {
		return slices.Contains(runner.RunCase(ctx, c).Broken(), f.Invariant)
	}
	count := func(c catalogue.Case) int {
		n := 0
		for i := 0; i < realReplays; i++ {
			if breaks(c) {
				n++
			}
		}
		if n > 0 {
			rr.Case = &c
		}
		return n
	}
	if rr.Reproduced = count(f.Shrunk); rr.Reproduced > 0 {
		return rr, nil
	}
	for _, m := range movedStalls(f.Shrunk) {
		if breaks(m.c) {
			if rr.Reproduced = count(m.c); rr.Reproduced > 0 {
				rr.Moved = m.what
				return rr, nil
			}
		}
	}
	if rr.Reproduced = count(f.Original); rr.Reproduced > 0 {
		rr.Original = true
	}
	return rr, nil
}

type movedStall struct {
	c    catalogue.Case
	what string
}

// movedStalls are c with one stall before the k-th store call moved to
// k-1, k+1, k-2, … (k-maxStallShift..k+maxStallShift, k >= 1).
func movedStalls(c catalogue.Case) []movedStall {
	var out []movedStall
	for d := 1; d <= maxStallShift; d++ {
		for _, delta := range []int{-d, d} {
			for i, st := range c.Steps {
				a, ok := st.Arms[faults.StoreCall]
				if !ok || a.Hit+delta < 1 {
					continue
				}
				m := c
				m.Steps = slices.Clone(c.Steps)
				m.Steps[i].Arms = maps.Clone(st.Arms)
				a2 := a
				a2.Hit += delta
				m.Steps[i].Arms[faults.StoreCall] = a2
				out = append(out, movedStall{m, fmt.Sprintf("worker %s's stall moved from store call %d to %d", st.Worker, a.Hit, a2.Hit)})
			}
		}
	}
	return out
}
