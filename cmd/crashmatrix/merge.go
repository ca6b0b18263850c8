package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/spf13/cobra"
)

// matrixID identifies the matrix certify runs by its settings;
// certifyrun adds every case (before --shard takes its part), so that
// merge can refuse shards of another matrix.
func matrixID(f certifyFlags, backend string) catalogue.MatrixID {
	mode := "processes"
	switch {
	case f.inProcess && f.inProcessFiles:
		mode = "in-process-files"
	case f.inProcess:
		mode = "in-process"
	}
	if f.store.recover != "" {
		// An upgrade run's cases are other cases than the same matrix's
		// on one build.
		mode += ", recovered by " + f.store.recover
	}
	return catalogue.MatrixID{Backend: backend, Mutant: f.mutant, Bugs: f.bugs, Seed: f.seed, Mode: mode,
		Points: f.points, Kinds: f.kinds, Classes: f.only, RandomKills: f.randomKills}
}

func mergeCmd() *cobra.Command {
	var jsonOut, junitOut, html string
	var details bool
	cmd := &cobra.Command{
		Use:   "merge REPORT.json...",
		Short: "Combine the JSON reports of certify --shard i/n into the matrix's verdict and reports",
		Long: `merge reads the JSON reports of the shards of one matrix (certify --shard i/n
--json FILE, run with the same flags on n machines), takes each case's result
from the report of its shard, and prints and writes one verdict and one set of
reports for the whole matrix, as an unsharded certify would.

A shard that is missing leaves its cases undecided and the merge undecided,
even a shard without a case (more shards than cases); a shard given twice leaves
the merge undecided (the worse result of each of its cases is kept); a shard
that failed or was undecided carries that into the merged verdict. Reports of
different matrices (another backend, mode, mutant, seed, selection or set of
cases), of a different split, of another report format version, or files that
are not JSON reports are refused, naming the file and the field.

Exit code: 0 certified, 1 an invariant broke (or a fault did not fire), 2 undecided or bad input.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			out := cmd.OutOrStdout()
			var in []report.MergeInput
			for _, file := range files {
				rep, err := report.ReadJSON(file)
				if err != nil {
					return err
				}
				in = append(in, report.MergeInput{File: file, Report: rep})
			}
			rep, err := report.Merge(in)
			if err != nil {
				return err
			}
			ropt := report.Options{Details: details, Command: "merge"}
			if s := in[0].Report.Shard; s != nil {
				ropt.Rerun = s.Rerun
				if base := s.Replay; base != "" {
					ropt.Replay = func(r verdict.CaseResult) string {
						if r.Case.Class == "merge" || r.Case.ID == "" {
							return ""
						}
						if r.Case.Class != "" {
							return base + " --class " + shellQuote(r.Case.Class) + " -v"
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
			if err := writeReports(out, rep, ropt, jsonOut, junitOut, html); err != nil {
				return err
			}
			if rep.ExitCode != 0 {
				return exitError{rep.ExitCode}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&jsonOut, "json", "", "write the merged JSON report here")
	fl.StringVar(&junitOut, "junit", "", "write the merged JUnit XML here")
	fl.StringVar(&html, "html", "", "write the merged self-contained HTML report here")
	fl.BoolVarP(&details, "details", "v", false, "list every failing case with every violation and its evidence (the default is a digest by cause)")
	return cmd
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
