package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/crashmatrix/crashmatrix/internal/bench"
	"github.com/spf13/cobra"
)

func benchCmd() *cobra.Command {
	var o bench.Options
	var docFile string
	var server serverFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the full crash matrix's wall time and kill-restart-recover cycles per second",
		RunE: func(cmd *cobra.Command, args []string) error {
			if docFile != "" && o.MatrixOnly {
				return fmt.Errorf("--doc with --matrix-only: the section --doc writes holds every figure, --matrix-only measures only the matrix and its floor")
			}
			run := func(out io.Writer) error { return runBench(cmd, o, &server, out) }
			if docFile == "" {
				return run(cmd.OutOrStdout())
			}
			return bench.ToDoc(cmd.OutOrStdout(), docFile, "bench "+o.Name, os.Args[1:], run)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&docFile, "doc", "", "also write the figures, with the date, commit, machine and load average, into the section \"bench BACKEND\" of this Markdown file (make bench: docs/performance.md)")
	fl.StringVar(&o.Name, "backend", "sqlite", "backend (containers: starts PostgreSQL and Neo4j first; the figures exclude start-up)")
	server.register(fl)
	fl.StringVar(&o.Dir, "workdir", "", "where case data goes (default /dev/shm when it has 1 GiB free, TMPDIR or not: data survives a process kill there exactly as on disk, and the figures measure the harness rather than the disk; --workdir /tmp measures both)")
	fl.IntVar(&o.Rounds, "rounds", 3, "full-matrix rounds")
	fl.BoolVar(&o.MatrixOnly, "matrix-only", false, "measure only the full matrix and its spawn floor (the figures of the harness's own cost), nothing after them")
	fl.IntVar(&o.Parallel, "parallel", 12, "cases at once in the full matrix")
	fl.DurationVar(&o.LeaseTTL, "lease-ttl", 0, "lease TTL for the full matrix (default as for certify)")
	fl.IntVar(&o.RandomKills, "random-kills", 100, "random kills added to the full matrix with the store's own windows, and hunting a mutant for the random-kill replay figure (0 skips both)")
	fl.IntVar(&o.Cycles, "cycles", 300, "kill-restart-recover cycles")
	fl.IntVar(&o.Restarts, "restarts", 3, "with --backend containers and server faults: server restarts measured per server (kill -> first answered query); then the server-fault matrix runs once")
	fl.IntVar(&o.CycleParallel, "cycle-parallel", 16, "cycles at once")
	fl.DurationVar(&o.CycleTTL, "cycle-lease-ttl", 50*time.Millisecond, "lease TTL for the cycles (a killed worker blocks its document this long)")
	fl.DurationVar(&o.Explore, "explore", 10*time.Second, "how long each exploration rate is measured (0 skips the exploration figures)")
	cmd.PreRunE = checkFlags
	return cmd
}

// runBench sets up the backend bench's flags name and runs bench.Run on
// it, printing on out.
func runBench(cmd *cobra.Command, o bench.Options, server *serverFlags, out io.Writer) error {
	server.noPowerLoss = true // the container figures are measured on the containers' own disks
	backend, self, cleanup, err := server.setUp(cmd, o.Name)
	if err != nil {
		return err
	}
	defer cleanup()
	o.Backend, o.Self, o.Out = backend, self, out
	o.Adaptive = o.LeaseTTL <= 0
	o.LeaseTTL = defaultLeaseTTL(o.LeaseTTL, backend)
	o.Servers, o.UseServerFaults = server.faults, server.useFaults
	return bench.Run(cmd.Context(), o)
}
