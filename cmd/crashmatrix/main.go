// Command crashmatrix proves that an implementation of the crash-safe
// graph-ingestion protocol, and every store under it, survives a process
// kill at every crash window.
//
// Exit codes: 0 certified, 1 an invariant broke, 2 undecided. A run that
// cannot vouch for its own setup exits 2 before any verdict and says why:
// a flag empty, out of range, or for another backend or execution mode; a
// --workdir another run is using; with --wall-clock, a --lease-ttl shorter
// than the steps it must cover (each command's --help has its own).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	_ "github.com/crashmatrix/crashmatrix/sim/embedded" // the sqlite and memory backends
	_ "github.com/crashmatrix/crashmatrix/sim/servers"  // the postgres backend
	_ "github.com/crashmatrix/crashmatrix/sim/storecmd" // stores in any language (--store-cmd)
	"github.com/spf13/cobra"
)

// noArgs refuses positional arguments, naming the first one: a typo such
// as "certify sqlite" (for --backend sqlite) must not run something else.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%s takes no arguments, got %q (flags start with --; see %s --help)", cmd.Name(), args[0], cmd.CommandPath())
	}
	return nil
}

// exitError carries a process exit code through cobra.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() {
	// A closed stdout (piped into head, a CI log reader gone) must not end
	// the run before its reports are written: with SIGPIPE asked for, a
	// write to a broken pipe fails with EPIPE instead of killing the
	// process, and the run goes on to its verdict and its report files.
	// (Not signal.Ignore: an ignored signal stays ignored in the worker
	// and store processes started from here.)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	root := &cobra.Command{
		Use:           "crashmatrix",
		Short:         "Crash-certify a graph-ingestion protocol implementation and its stores",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(certifyCmd(), workerCmd(), demoCmd(), benchCmd(), benchStoreCmd(), runCmd(), exploreCmd(), snapshotCmd(), mergeCmd())
	for _, c := range root.Commands() {
		if c.Args == nil {
			// cobra runs a leaf command with any stray word: "certify
			// foo" would certify. A command that takes arguments says so
			// (run takes files).
			c.Args = noArgs
		}
	}
	var cpuProfile string
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof reads it)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if cpuProfile == "" {
			return nil
		}
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		return pprof.StartCPUProfile(f)
	}
	err := root.ExecuteContext(ctx)
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	stop()
	// Store processes (--store-cmd) a command left open, interrupted or
	// not, end with their whole process group.
	storeproc.KillAll()
	if err != nil {
		if e, ok := err.(exitError); ok {
			os.Exit(e.code)
		}
		fmt.Fprintln(os.Stderr, "crashmatrix:", err)
		os.Exit(2)
	}
}
