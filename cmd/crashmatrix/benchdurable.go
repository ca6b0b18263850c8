package main

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/spf13/cobra"
)

// durableSweepTarget is issue 38's bound on what the durable-step sweep
// may cost: the embedded matrix with the sweep (its probe on a lazy mount
// and its cases) at most 1.5 times the matrix without it.
const durableSweepTarget = 1.5

// benchDurableSteps measures what the durable-step sweep costs the
// embedded matrix, in rounds of pairs run back to back (which half goes
// first alternates, as in benchPowerLoss): the matrix next to the matrix
// with the sweep's probe and its cases. It says how many sweep cases the
// backend gets, from the probe's count of the durable file operations of
// each store call.
func benchDurableSteps(cmd *cobra.Command, server *serverFlags, self, backend, benchDir string, ttl time.Duration, parallel, rounds int, adaptive bool) error {
	out := cmd.OutOrStdout()
	r, work, err := benchRunner(server, benchDir, backend, self, ttl, 1, adaptive)
	if err != nil {
		return err
	}
	if !r.WatchesDurableSteps() {
		os.RemoveAll(work)
		fmt.Fprintf(out, "durable steps: not swept on %s (%s)\n", backend, sim.PowerLossNotTested(r.PowerLossUntested()))
		return nil
	}
	probe := catalogue.DurableProbe()
	sweep, err := sweepCases(cmd, r, backend)
	os.RemoveAll(work)
	if err != nil {
		return err
	}
	plain := catalogue.Lease(ttl).Matrix()
	with := append(append(catalogue.Lease(ttl).Matrix(), probe), sweep...)
	run := func(cases []catalogue.Case, what string) (time.Duration, error) {
		r, work, err := benchRunner(server, benchDir, backend, self, ttl, 1, adaptive)
		if err != nil {
			return 0, err
		}
		rep := r.RunAll(cmd.Context(), cases, parallel, nil)
		if rep.ExitCode != 0 {
			report.WriteTerminal(out, rep, report.Options{Command: "bench"})
			fmt.Fprintf(out, "case data and histories: %s\n", work)
			return 0, fmt.Errorf("%s did not certify: the figure would be meaningless", what)
		}
		os.RemoveAll(work)
		return rep.Took, nil
	}
	var ratios []float64
	for i := 0; i < rounds; i++ {
		tp, tw, err := backToBack(i, func() (time.Duration, error) { return run(plain, "the plain matrix") },
			func() (time.Duration, error) { return run(with, "the matrix with the durable-step sweep") })
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
func sweepCases(cmd *cobra.Command, r *sim.Runner, backend string) ([]catalogue.Case, error) {
	res := r.RunCase(cmd.Context(), catalogue.DurableProbe())
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
	fmt.Fprintf(cmd.OutOrStdout(), "durable steps on %s: the probe saw %d store calls make a durable file operation, %d of them more than one: %d sweep cases\n",
		backend, len(res.DurableCalls), multi, len(sweep))
	return sweep, nil
}
