// Command crashmatrix proves that an implementation of the crash-safe
// graph-ingestion protocol, and every store under it, survives a process
// kill at every crash window.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	_ "github.com/crashmatrix/crashmatrix/sim/servers" // the postgres backend
	"github.com/spf13/cobra"
)

// exitError carries a process exit code through cobra.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	root := &cobra.Command{
		Use:           "crashmatrix",
		Short:         "Crash-certify a graph-ingestion protocol implementation and its stores",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(certifyCmd(), workerCmd(), demoCmd(), benchCmd(), runCmd(), exploreCmd())
	err := root.ExecuteContext(ctx)
	stop()
	if err != nil {
		if e, ok := err.(exitError); ok {
			os.Exit(e.code)
		}
		fmt.Fprintln(os.Stderr, "crashmatrix:", err)
		os.Exit(2)
	}
}
