package main

import (
	"fmt"
	"io"
	"os"

	"github.com/crashmatrix/crashmatrix/internal/bench"
	"github.com/spf13/cobra"
)

// benchStoreCmd measures what certifying a store over the store protocol
// costs (bench.Store).
func benchStoreCmd() *cobra.Command {
	var o bench.StoreOptions
	var docFile, name string
	cmd := &cobra.Command{
		Use:   "bench-store --store-cmd CMD",
		Short: "Measure a store over the store protocol: cost per call, start-up, and its crash matrix next to the Go SQLite one",
		RunE: func(cmd *cobra.Command, _ []string) error {
			run := func(out io.Writer) error {
				if o.Command == "" {
					return fmt.Errorf("--store-cmd is required")
				}
				o.Out = out
				return bench.Store(cmd.Context(), o)
			}
			if docFile == "" {
				return run(cmd.OutOrStdout())
			}
			return bench.ToDoc(cmd.OutOrStdout(), docFile, "bench store "+name, os.Args[1:], run)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Command, "store-cmd", "", "the System A store's command (store protocol), e.g. \"python3 -S examples/python/sqlite_store.py\"")
	fl.StringVar(&o.Dir, "workdir", "", "where case data goes (default /dev/shm when it has 1 GiB free)")
	fl.IntVar(&o.Calls, "calls", 2000, "store calls timed for the cost per call")
	fl.IntVar(&o.Rounds, "rounds", 1, "matrix rounds on each backend (0: the cost per call only)")
	fl.IntVar(&o.Parallel, "parallel", 12, "cases at once in the matrices")
	fl.Float64Var(&o.Target, "target", bench.StoreMatrixTarget, "the target for the matrix's ratio to the Go SQLite matrix (issue 40: 1.5 for the Python example, 4 for the Java one)")
	fl.DurationVar(&o.Certify, "certify", 0, "also time `crashmatrix certify --store-cmd CMD` (the conformance suites, then the full matrix) against this target (0: not run)")
	fl.StringVar(&docFile, "doc", "", "also write the figures, with the date, commit, machine and load average, into the section \"bench store NAME\" of this Markdown file (make bench: docs/performance.md)")
	fl.StringVar(&name, "name", "", "the store's name in the --doc section (python, java)")
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if docFile != "" && name == "" {
			return fmt.Errorf("--doc needs --name (the section is \"bench store NAME\")")
		}
		return checkFlags(c, args)
	}
	return cmd
}
