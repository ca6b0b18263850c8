// Package mergerun is crashmatrix merge below its flags: it reads the
// JSON reports of the shards of one matrix (certify --shard i/n), puts
// them together into the matrix's verdict (report.Merge), and prints and
// writes it as an unsharded certify would, with a line per shard. The CLI
// parses the flags into Options and calls Run.
package mergerun

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/internal/cmdkit"
	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// Options are one merge.
type Options struct {
	// Files are the shards' JSON reports.
	Files []string
	// JSON, JUnit and HTML name the merged reports to write ("": none).
	JSON, JUnit, HTML string
	// Details lists every failing case with every violation.
	Details bool
}

// Run merges the reports, prints the verdict to out and writes the
// merged reports. It returns the exit code: 0 certified, 1 an invariant
// broke, 2 undecided; an error is bad input (the caller exits 2).
func Run(o Options, out io.Writer) (int, error) {
	var in []report.MergeInput
	for _, file := range o.Files {
		rep, err := report.ReadJSON(file)
		if err != nil {
			return 0, err
		}
		in = append(in, report.MergeInput{File: file, Report: rep})
	}
	rep, err := report.Merge(in)
	if err != nil {
		return 0, err
	}
	ropt := report.Options{Details: o.Details, Command: "merge"}
	if s := in[0].Report.Shard; s != nil {
		ropt.Rerun = s.Rerun
		if base := s.Replay; base != "" {
			ropt.Replay = func(r verdict.CaseResult) string {
				if r.Case.Class == "merge" || r.Case.ID == "" {
					return ""
				}
				if r.Case.Class != "" {
					return base + " --class " + cmdkit.ShellQuote(r.Case.Class) + " -v"
				}
				return base + " --point " + string(r.Case.Point) + " --kind " + string(r.Case.Kind) + " -v"
			}
		}
	}
	report.WriteTerminal(out, rep, ropt)
	for _, m := range rep.Merged {
		fmt.Fprintf(out, "shard %s %s: %d %s, %s, took %s; %s\n", m.Shard, m.File, m.Cases, plural(m.Cases, "result", "results"),
			m.Verdict, m.Took.Round(time.Millisecond), strings.TrimPrefix(m.Timing.String(), "timing: "))
	}
	if err := cmdkit.WriteReports(out, rep, ropt, o.JSON, o.JUnit, o.HTML); err != nil {
		return 0, err
	}
	return rep.ExitCode, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
