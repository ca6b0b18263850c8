package main

import (
	"github.com/crashmatrix/crashmatrix/internal/mergerun"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
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
	var o mergerun.Options
	cmd := &cobra.Command{
		Use:   "merge REPORT.json...",
		Short: "Combine the JSON reports of certify --shard i/n into the matrix's verdict and reports",
		Long:  mergeLong,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			o.Files = files
			return exitWith(mergerun.Run(o, cmd.OutOrStdout()))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.JSON, "json", "", "write the merged JSON report here")
	fl.StringVar(&o.JUnit, "junit", "", "write the merged JUnit XML here")
	fl.StringVar(&o.HTML, "html", "", "write the merged self-contained HTML report here")
	fl.BoolVarP(&o.Details, "details", "v", false, "list every failing case with every violation and its evidence (the default is a digest by cause)")
	return cmd
}

// mergeLong is merge's help.
const mergeLong = `merge reads the JSON reports of the shards of one matrix (certify --shard i/n
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

Exit code: 0 certified, 1 an invariant broke (or a fault did not fire), 2 undecided or bad input.`
