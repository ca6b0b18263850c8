package bench

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// tornDefaultTarget is issue 41's bound on what its new default columns
// may cost: the embedded default matrix with them at most 1.5 times the
// matrix without them.
const tornDefaultTarget = 1.5

// benchSet is a set of cases bench runs on a fresh runner, every case's
// data on a lazy mount when lazy says so (sim.Config.LazyData).
type benchSet struct {
	what  string
	cases []catalogue.Case
	lazy  bool
}

// tornDefault measures what the torn-write column (512-byte sectors,
// in the default matrix where power loss runs on an embedded backend)
// costs: the default matrix as certify builds it (after its probe: the
// window cases and classes, the power-loss column, the between-calls and
// durable-step sweeps) with the torn-write column next to the same without
// it, in rounds of pairs run back to back (pair).
// It returns the function that prints the figure, after powerLoss's.
func (o *sitting) tornDefault() (func(), error) {
	out := o.Out
	r, work, err := o.runner(1, o.Adaptive)
	if err != nil {
		return nil, err
	}
	probe, err := r.Probe(o.ctx)
	os.RemoveAll(work)
	if err != nil {
		return nil, fmt.Errorf("the torn-write column's figure: the probe: %w", err)
	}
	sel := catalogue.Selection{}
	if _, err := r.PowerLossSelection(&sel); err != nil {
		return nil, err
	}
	if !sel.TornWrite {
		return func() {
			fmt.Fprintln(out, "torn writes: not in this backend's default matrix (--kind torn-write only)")
		}, nil
	}
	with := sel.Cases(probe.Probe, catalogue.Lease(o.LeaseTTL), 1)
	without := sel
	without.TornWrite = false
	before := without.Cases(probe.Probe, catalogue.Lease(o.LeaseTTL), 1)
	var ratios []float64
	for i := 0; i < o.Rounds; i++ {
		tb, tw, err := o.pair(i, benchSet{what: "the default matrix without the torn-write column", cases: before},
			benchSet{what: "the default matrix with the torn-write column", cases: with})
		if err != nil {
			return nil, err
		}
		ratios = append(ratios, float64(tw)/float64(tb))
		fmt.Fprintf(out, "  torn writes, round %d: the default matrix without the torn-write column %d cases %s, with it (512-byte sectors) %d cases %s (x%.2f)\n",
			i+1, len(before), tb.Round(time.Millisecond), len(with), tw.Round(time.Millisecond), ratios[i])
	}
	slices.Sort(ratios)
	return func() {
		med := ratios[len(ratios)/2]
		fmt.Fprintf(out, "torn writes: the default embedded matrix with the torn-write column (512-byte sectors) next to without it, back to back: median x%.2f (min x%.2f, max x%.2f over %d rounds) (target <= %gx: %s)\n",
			med, ratios[0], ratios[len(ratios)-1], len(ratios), tornDefaultTarget, metOrNot(med <= tornDefaultTarget))
	}, nil
}
