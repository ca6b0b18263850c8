package main

import (
	"fmt"

	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/spf13/cobra"
)

func workerCmd() *cobra.Command {
	var specPath string
	var floor bool
	cmd := &cobra.Command{
		Use:    "worker --spec FILE",
		Short:  "Run one simulated worker process (started by the supervisor)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if floor {
				return nil // bench's spawn floor: start and exit, nothing else
			}
			if specPath == "" {
				return fmt.Errorf("worker: --spec is required")
			}
			spec, err := sim.ReadWorkerSpec(specPath)
			if err != nil {
				return err
			}
			backend, err := sim.ResolveBackend(spec.Backend)
			if err != nil {
				return err
			}
			return sim.RunWorker(cmd.Context(), spec, backend, sim.ProcessWorkerOptions())
		},
	}
	cmd.Flags().StringVar(&specPath, "spec", "", "worker spec (JSON)")
	cmd.Flags().BoolVar(&floor, "floor", false, "start and exit at once (bench measures the cost of a worker process)")
	return cmd
}
