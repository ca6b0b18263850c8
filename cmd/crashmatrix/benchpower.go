package main

import (
	"fmt"
	"os"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/spf13/cobra"
)

// benchPowerLoss measures what power loss costs: the crash column with
// the case data on tmpfs next to the power-loss column (the same cases,
// the data on the lazy file system, the power cut once per case), and the
// full matrix with the power-loss column next to the plain one (plain,
// measured before; target at most 2x).
func benchPowerLoss(cmd *cobra.Command, self, backend, benchDir string, ttl time.Duration, parallel int, adaptive bool, plain time.Duration) error {
	out := cmd.OutOrStdout()
	probe, work, err := benchRunner(benchDir, backend, self, ttl, 1, adaptive)
	if err != nil {
		return err
	}
	os.RemoveAll(work)
	if why := probe.PowerLossUntested(); why != "" {
		fmt.Fprintln(out, sim.PowerLossNotTested(why))
		return nil
	}
	run := func(what string, cases []sim.Case) (time.Duration, error) {
		r, work, err := benchRunner(benchDir, backend, self, ttl, 1, adaptive)
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
	ms := ttl.Milliseconds()
	crash := sim.Filter(sim.Matrix(ms), nil, []faults.Kind{faults.Crash}, nil)
	power := sim.PowerLossMatrix(nil, ms)
	tc, err := run("the crash column", crash)
	if err != nil {
		return err
	}
	tp, err := run("the power-loss column", power)
	if err != nil {
		return err
	}
	full := append(sim.Matrix(ms), power...)
	tf, err := run("the full matrix with the power-loss column", full)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "power loss: crash column on tmpfs %d cases %s; power-loss column on the lazy file system %d cases %s (x%.2f)\n",
		len(crash), tc.Round(time.Millisecond), len(power), tp.Round(time.Millisecond), float64(tp)/float64(tc))
	fmt.Fprintf(out, "power loss: full matrix with the power-loss column %d cases %s, plain %s (x%.2f, target <= 2x)\n",
		len(full), tf.Round(time.Millisecond), plain.Round(time.Millisecond), float64(tf)/float64(plain))
	return nil
}
