package main

import (
	"fmt"

	"github.com/crashmatrix/crashmatrix/internal/demorun"
	"github.com/spf13/cobra"
)

func demoCmd() *cobra.Command {
	var o demorun.Options
	cmd := &cobra.Command{
		Use:     "demo",
		Aliases: []string{"ingest"},
		Short:   "Ingest a small corpus through the reference service on the embedded default and print each operation's stages",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.KillAt != "" && !cmd.Flags().Changed("dir") {
				return fmt.Errorf("--kill-at needs --dir: the database the killed process leaves is the point")
			}
			return demorun.Run(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", "", "keep the SQLite database in this directory")
	cmd.Flags().StringVar(&o.Space, "space", "demo", "graph space")
	cmd.Flags().StringVar(&o.KillAt, "kill-at", "", "POINT[@HIT]: the process kills itself (SIGKILL) at that hit of an ingestion failpoint, leaving the database in --dir as a crash leaves it (input for crashmatrix snapshot)")
	return cmd
}
