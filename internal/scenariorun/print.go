package scenariorun

import (
	"fmt"
	"io"

	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// printCase prints one scenario's outcome in detail: why it was not
// exercised, its notes, every violation with evidence, its history and
// its replay command.
func printCase(out io.Writer, r verdict.CaseResult, replay string) {
	if r.Verdict == verdict.NotExercised {
		fmt.Fprintf(out, "      not exercised: %s\n", r.WhyNotExercised())
	}
	for _, n := range r.Notes {
		fmt.Fprintf(out, "      note: %s\n", n)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(out, "      %s\n", v)
		for _, e := range v.Evidence {
			fmt.Fprintf(out, "          %s\n", e)
		}
	}
	fmt.Fprintf(out, "      history: %s\n", report.HistoryPath(r))
	if logs := r.StoreLogs(); logs != "" {
		fmt.Fprintf(out, "      store logs: %s\n", logs)
	}
	if replay != "" {
		fmt.Fprintf(out, "      replay:  %s\n", replay)
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i + 1
		}
	}
	return min(len(a), len(b)) + 1
}
