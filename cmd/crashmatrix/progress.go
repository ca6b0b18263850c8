package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/mattn/go-isatty"
)

// progressLog starts the progress lines of a run (sim.ProgressLog) on out
// when stdout is not a terminal (a CI log, a pipe, a file), and returns
// nil on a terminal, where certify draws a progress bar instead. The
// caller stops it before printing its results.
func progressLog(out io.Writer, what, unit string, total int, budget time.Duration) *sim.ProgressLog {
	if isatty.IsTerminal(os.Stdout.Fd()) {
		return nil
	}
	return sim.NewProgressLog(func(line string) { fmt.Fprintln(out, line) }, what, unit, total, budget)
}
