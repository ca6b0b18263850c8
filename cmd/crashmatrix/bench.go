package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"time"

	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/spf13/cobra"
)

func benchCmd() *cobra.Command {
	var rounds, cycles, parallel, cycleParallel int
	var leaseTTL, cycleTTL time.Duration
	var backend string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure the full crash matrix's wall time and kill-restart-recover cycles per second",
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			self, err := os.Executable()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			fmt.Fprintf(out, "crashmatrix bench: backend %s, %d cores, %s/%s\n", backend, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
			var walls []time.Duration
			for i := 0; i < rounds; i++ {
				work, err := os.MkdirTemp("", "crashmatrix-bench-")
				if err != nil {
					return err
				}
				r, err := sim.NewRunner(sim.Config{Backend: sim.BackendSpec{Name: backend}, Launcher: sim.BinaryLauncher{Path: self}, WorkDir: work, LeaseTTL: leaseTTL, Seed: int64(i + 1)})
				if err != nil {
					return err
				}
				cases := sim.Matrix(leaseTTL.Milliseconds())
				rep := r.RunAll(ctx, cases, parallel, nil)
				if rep.ExitCode != 0 {
					sim.WriteMatrix(out, rep)
					fmt.Fprintf(out, "case data and histories: %s\n", work)
					return fmt.Errorf("full matrix round %d did not certify: the figure would be meaningless", i+1)
				}
				os.RemoveAll(work)
				walls = append(walls, rep.Took)
				fmt.Fprintf(out, "  full matrix round %d: %d cases (every window x every fault kind + case classes), %s\n", i+1, len(cases), rep.Took.Round(time.Millisecond))
			}
			sort.Slice(walls, func(i, j int) bool { return walls[i] < walls[j] })
			fmt.Fprintf(out, "full matrix wall time: median %s, min %s, max %s over %d rounds (target <= 5s)\n",
				walls[len(walls)/2].Round(time.Millisecond), walls[0].Round(time.Millisecond), walls[len(walls)-1].Round(time.Millisecond), len(walls))

			work, err := os.MkdirTemp("", "crashmatrix-bench-")
			if err != nil {
				return err
			}
			r, err := sim.NewRunner(sim.Config{Backend: sim.BackendSpec{Name: backend}, Launcher: sim.BinaryLauncher{Path: self}, WorkDir: work, LeaseTTL: cycleTTL, Seed: 7})
			if err != nil {
				return err
			}
			rep := r.RunAll(ctx, sim.CycleCases(cycles), cycleParallel, nil)
			good := rep.Counts[sim.Pass]
			if good != cycles {
				sim.WriteMatrix(out, rep)
				return fmt.Errorf("%d of %d kill-restart-recover cycles did not pass (data in %s)", cycles-good, cycles, work)
			}
			os.RemoveAll(work)
			fmt.Fprintf(out, "kill-restart-recover cycles: %d in %s = %.1f cycles/s (%d at once, lease TTL %s; each cycle: a worker killed by SIGKILL after its graph write, a new worker recovers, invariants checked) (target >= 50/s)\n",
				cycles, rep.Took.Round(time.Millisecond), float64(cycles)/rep.Took.Seconds(), cycleParallel, cycleTTL)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&backend, "backend", "sqlite", "backend")
	fl.IntVar(&rounds, "rounds", 3, "full-matrix rounds")
	fl.IntVar(&parallel, "parallel", 12, "cases at once in the full matrix")
	fl.DurationVar(&leaseTTL, "lease-ttl", 250*time.Millisecond, "lease TTL for the full matrix")
	fl.IntVar(&cycles, "cycles", 300, "kill-restart-recover cycles")
	fl.IntVar(&cycleParallel, "cycle-parallel", 16, "cycles at once")
	fl.DurationVar(&cycleTTL, "cycle-lease-ttl", 50*time.Millisecond, "lease TTL for the cycles (a killed worker blocks its document this long)")
	return cmd
}
