package bench

import (
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// powerLossTarget is issue 22's bound on what power loss may cost: the
// embedded matrix with the power-loss column at most twice the plain
// matrix, and the case data on the lazy file system at most twice tmpfs
// without a power loss.
const powerLossTarget = 2.0

// powerLoss measures what power loss costs, in rounds of pairs run
// back to back, so that both halves of a ratio see the same load on a
// shared machine (which half goes first alternates): the crash column with
// the case data on tmpfs next to the same column with the data on the lazy
// file system and no power cut (what the file system costs without a
// fault), and next to the power-loss column (the same windows, the data on
// the lazy file system, the power cut once per case); and the plain
// embedded matrix next to the matrix with the power-loss column. Each
// figure is the median ratio over the rounds, with its target.
func (o *sitting) powerLoss() error {
	out := o.Out
	probe, work, err := o.runner(1, o.Adaptive)
	if err != nil {
		return err
	}
	os.RemoveAll(work)
	if why := probe.PowerLossUntested(); why != "" {
		fmt.Fprintln(out, sim.PowerLossNotTested(why))
		return nil
	}
	cases := catalogue.Lease(o.LeaseTTL)
	crash := catalogue.Filter(cases.Matrix(), nil, []faults.Kind{faults.Crash}, nil)
	power := cases.PowerLossMatrix(nil)
	plain := cases.Matrix()
	full := append(cases.Matrix(), power...)
	var lazies, columns, matrices []float64
	for i := 0; i < o.Rounds; i++ {
		tc, tl, err := o.pair(i, benchSet{"the crash column", crash, false}, benchSet{"the crash column on the lazy file system", crash, true})
		if err != nil {
			return err
		}
		tp, err := o.runSet(benchSet{"the power-loss column", power, false})
		if err != nil {
			return err
		}
		tm, tf, err := o.pair(i, benchSet{"the plain matrix", plain, false}, benchSet{"the matrix with the power-loss column", full, false})
		if err != nil {
			return err
		}
		lazies = append(lazies, float64(tl)/float64(tc))
		columns = append(columns, float64(tp)/float64(tc))
		matrices = append(matrices, float64(tf)/float64(tm))
		fmt.Fprintf(out, "  power loss, round %d: crash column on tmpfs %d cases %s, the same on the lazy file system %s (x%.2f), power-loss column on the lazy file system %d cases %s (x%.2f); plain matrix %d cases %s, with the power-loss column %d cases %s (x%.2f)\n",
			i+1, len(crash), tc.Round(time.Millisecond), tl.Round(time.Millisecond), lazies[i], len(power), tp.Round(time.Millisecond), columns[i],
			len(plain), tm.Round(time.Millisecond), len(full), tf.Round(time.Millisecond), matrices[i])
	}
	torn, err := o.tornDefault()
	if err != nil {
		return err
	}
	powerLossFigures(out, lazies, columns, matrices)
	torn()
	return nil
}

// powerLossFigures prints the power-loss figures: the medians of the
// rounds' ratios, each with its target.
func powerLossFigures(out io.Writer, lazies, columns, matrices []float64) {
	for _, f := range []struct {
		what   string
		ratios []float64
	}{
		{"without a fault, the crash column with its case data on the lazy file system (no power cut) next to the same on tmpfs", lazies},
		{"the power-loss column (case data on the lazy file system) next to the crash column (on tmpfs)", columns},
		{"the embedded matrix with the power-loss column next to the plain matrix", matrices},
	} {
		slices.Sort(f.ratios)
		med := f.ratios[len(f.ratios)/2]
		fmt.Fprintf(out, "power loss: %s, back to back: median x%.2f (min x%.2f, max x%.2f over %d rounds) (target <= %gx: %s)\n",
			f.what, med, f.ratios[0], f.ratios[len(f.ratios)-1], len(f.ratios), powerLossTarget, metOrNot(med <= powerLossTarget))
	}
}

// runSet runs a set of cases on a fresh runner, every case's data on a
// lazy mount when it says so (sim.Config.LazyData), and returns its wall
// time.
func (o *sitting) runSet(s benchSet) (time.Duration, error) {
	r, work, err := o.runnerWith(1, o.Adaptive, func(c *sim.Config) { c.LazyData = s.lazy })
	if err != nil {
		return 0, err
	}
	rep := r.RunAll(o.ctx, s.cases, o.Parallel, nil)
	if rep.ExitCode != 0 {
		report.WriteTerminal(o.Out, rep, report.Options{Command: "bench"})
		fmt.Fprintf(o.Out, "case data and histories: %s\n", work)
		return 0, fmt.Errorf("%s did not certify: the figure would be meaningless", s.what)
	}
	os.RemoveAll(work)
	return rep.Took, nil
}

// pair runs a and b back to back (backToBack) in the given round.
func (o *sitting) pair(round int, a, b benchSet) (time.Duration, time.Duration, error) {
	return backToBack(round, func() (time.Duration, error) { return o.runSet(a) }, func() (time.Duration, error) { return o.runSet(b) })
}

// backToBack runs a and b back to back, b first in odd rounds, so that
// both halves of a ratio see the same load on a shared machine.
func backToBack(round int, a, b func() (time.Duration, error)) (ta, tb time.Duration, err error) {
	if round%2 == 1 {
		if tb, err = b(); err != nil {
			return
		}
		ta, err = a()
		return
	}
	if ta, err = a(); err != nil {
		return
	}
	tb, err = b()
	return
}
