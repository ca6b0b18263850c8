package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// durableSweepTarget is issue 38's bound on what the durable-step sweep
// may cost: the embedded matrix with the sweep (its probe on a lazy mount
// and its cases) at most 1.5 times the matrix without it.
const durableSweepTarget = 1.5

// durableSteps measures what the durable-step sweep costs the
// embedded matrix, in rounds of pairs run back to back (which half goes
// first alternates, as in powerLoss): the matrix next to the matrix
// with the sweep's probe and its cases. It says how many sweep cases the
// backend gets, from the probe's count of the durable file operations of
// each store call.
func (o *sitting) durableSteps() error {
	out := o.Out
	r, work, err := o.runner(1, o.Adaptive)
	if err != nil {
		return err
	}
	if !r.WatchesDurableSteps() {
		os.RemoveAll(work)
		fmt.Fprintf(out, "durable steps: not swept on %s (%s)\n", o.Backend, sim.PowerLossNotTested(r.PowerLossUntested()))
		return nil
	}
	probe := catalogue.DurableProbe()
	sweep, err := sweepCases(o.ctx, o.Out, r, o.Backend)
	os.RemoveAll(work)
	if err != nil {
		return err
	}
	plain := catalogue.Lease(o.LeaseTTL).Matrix()
	with := append(append(catalogue.Lease(o.LeaseTTL).Matrix(), probe), sweep...)
	var ratios []float64
	for i := 0; i < o.Rounds; i++ {
		tp, tw, err := backToBack(i, func() (time.Duration, error) { return o.runSet(benchSet{what: "the plain matrix", cases: plain}) },
			func() (time.Duration, error) {
				return o.runSet(benchSet{what: "the matrix with the durable-step sweep", cases: with})
			})
		if err != nil {
			return err
		}
		ratios = append(ratios, float64(tw)/float64(tp))
		fmt.Fprintf(out, "  durable steps, round %d: plain matrix %d cases %s, with the sweep (its probe and %d cases) %d cases %s (x%.2f)\n",
			i+1, len(plain), tp.Round(time.Millisecond), len(sweep), len(with), tw.Round(time.Millisecond), ratios[i])
	}
	slices.Sort(ratios)
	med := ratios[len(ratios)/2]
	fmt.Fprintf(out, "durable steps: the embedded matrix with the durable-step sweep next to the matrix without it, back to back: median x%.2f (min x%.2f, max x%.2f over %d rounds) (target <= %gx: %s)\n",
		med, ratios[0], ratios[len(ratios)-1], len(ratios), durableSweepTarget, metOrNot(med <= durableSweepTarget))
	return nil
}

// sweepCases runs the durable-step probe on r and prints how many sweep
// cases the backend gets, from what the probe counted.
func sweepCases(ctx context.Context, out io.Writer, r *sim.Runner, backend string) ([]catalogue.Case, error) {
	res := r.RunCase(ctx, catalogue.DurableProbe())
	if res.Verdict != verdict.Pass {
		return nil, fmt.Errorf("the durable-step probe on %s: %s %v %v", backend, res.Verdict, res.Broken(), res.Notes)
	}
	sweep := catalogue.DurableStepCases(res.DurableCalls)
	multi := 0
	for _, c := range res.DurableCalls {
		if len(c.Ops) > 1 {
			multi++
		}
	}
	fmt.Fprintf(out, "durable steps on %s: the probe saw %d store calls make a durable file operation, %d of them more than one: %d sweep cases\n",
		backend, len(res.DurableCalls), multi, len(sweep))
	return sweep, nil
}
