package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/spf13/cobra"
)

// lockWorkdir takes the folder --workdir names for this run (nothing to
// take without it: a temporary folder is the run's own), and returns what
// gives it up. Two runs in one folder overwrite each other's cases and
// both end NOT CERTIFIED against a correct store, so a folder another run
// holds ends the command with exit 2, naming that run; a folder whose run
// was killed is taken over, with a note.
func lockWorkdir(cmd *cobra.Command, dir string) (release func(), err error) {
	if dir == "" {
		return func() {}, nil
	}
	l, err := sim.LockWorkDir(dir, strings.Join(rerunArgs(cmd), " "))
	var busy *sim.WorkDirBusyError
	switch {
	case errors.As(err, &busy):
		fmt.Fprintln(cmd.ErrOrStderr(), "crashmatrix: --workdir:", err)
		return nil, exitError{2}
	case err != nil:
		return nil, fmt.Errorf("--workdir: %w", err)
	}
	if l.Stale != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "crashmatrix: --workdir %s: taken over from a run that ended without giving it up (%s)\n", dir, *l.Stale)
	}
	return l.Release, nil
}
