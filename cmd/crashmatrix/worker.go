package main

import (
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/spf13/cobra"
)

func workerCmd() *cobra.Command {
	var specPath string
	cmd := &cobra.Command{
		Use:    "worker --spec FILE",
		Short:  "Run one simulated worker process (started by the supervisor)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
	_ = cmd.MarkFlagRequired("spec")
	return cmd
}
