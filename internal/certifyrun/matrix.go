package certifyrun

import (
	"cmp"
	"fmt"
	"os"

	"github.com/crashmatrix/crashmatrix/internal/cmdkit"
	"github.com/crashmatrix/crashmatrix/internal/tune"
	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/mattn/go-isatty"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// runMatrix runs the cases, with progress lines (outside a terminal) or
// a progress bar (on one) unless quiet, and makes the report.
func (r *run) runMatrix(runner *sim.Runner, cases []catalogue.Case) {
	var progress func(verdict.CaseResult)
	var pb *mpb.Progress
	var plog *sim.ProgressLog
	if !r.o.Quiet {
		plog = cmdkit.ProgressLog(r.out, "certify", "cases", len(cases), 0)
	}
	if plog != nil {
		progress = plog.Case
	} else if !r.o.Quiet && isatty.IsTerminal(os.Stderr.Fd()) {
		pb = mpb.New(mpb.WithOutput(os.Stderr), mpb.WithWidth(40))
		bar := pb.AddBar(int64(len(cases)), mpb.PrependDecorators(decor.Name("certify "+r.o.Label+" "), decor.CountersNoUnit("%d/%d")),
			mpb.AppendDecorators(decor.Elapsed(decor.ET_STYLE_GO)))
		progress = func(verdict.CaseResult) { bar.Increment() }
	}
	restoreGC := tune.GC(true)
	restoreProcs := func() {}
	if !runner.Config().InProcess {
		restoreProcs = tune.Procs(r.o.Parallel)
	}
	r.rep = runner.RunAll(r.ctx, cases, r.o.Parallel, progress)
	if plog != nil {
		plog.Stop()
	}
	restoreProcs()
	restoreGC()
	r.rep.WithProbe(r.probe, r.perr, r.sel)
	r.rep.LeftOut = r.leftOut
	r.rep.Matrix = r.matrixID
	if s := r.o.Shard; s != nil {
		r.rep.Shard = &catalogue.ShardRun{Shard: *s, Cases: len(cases), Rerun: r.o.Replay.Rerun, Replay: r.o.Replay.Base}
	}
	// A run that failed keeps its case data for the histories, even when
	// writing a report fails below; --workdir and --keep keep it always.
	r.kept = !r.tmp || r.o.Keep || (r.rep.ExitCode != 0 && r.ctx.Err() == nil)
	r.rep.PowerLoss = r.untested
	runner.CloseShared()
	if pb != nil {
		pb.Wait()
	}
}

// finish writes the verdict, the reports and the failing kills' replay
// scenarios, says where the case data is, and returns the exit code.
func (r *run) finish() (int, error) {
	interrupted := r.ctx.Err() != nil
	r.kept = r.kept || (r.rep.ExitCode != 0 && !interrupted)
	if err := report.SaveTimelines(r.workdir, &r.rep); err != nil {
		return 0, err
	}
	report.WriteTerminal(r.out, r.rep, r.ropt)
	fmt.Fprintln(r.out, r.rep.Timing)
	if r.rep.StoreStarts != "" {
		fmt.Fprintln(r.out, r.rep.StoreStarts)
	}
	if err := cmdkit.WriteReports(r.out, r.rep, r.ropt, r.o.JSON, r.o.JUnit, r.o.HTML); err != nil {
		return 0, err
	}
	if err := writeKillReplays(r.out, r.workdir, cmp.Or(r.o.Replay.Backend, r.o.Backend), serviceCommand(r.o.Config.Service), r.o.LeaseTTL, r.rep, r.o.Replay.Args...); err != nil {
		return 0, err
	}
	switch {
	case r.kept:
		fmt.Fprintf(r.out, "case data and histories: %s\n", r.workdir)
	case interrupted:
		// An interrupted run leaves nothing behind: its workers are
		// killed (RunAll), its containers stopped (the caller's
		// cleanup), and its temporary case data removed (Run); --workdir
		// or --keep keep it.
		fmt.Fprintln(r.o.Stderr, "crashmatrix: interrupted; every worker killed, temporary case data removed")
	}
	return r.rep.ExitCode, nil
}
