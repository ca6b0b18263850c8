package main

import (
	"slices"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Every number a command takes has a range (or is on the short list of
// those any value of which means something), and every command that runs
// cases checks its flags before it runs: a new numeric flag without a
// range fails here.
func TestEveryNumericFlagHasALimit(t *testing.T) {
	for _, cmd := range []*cobra.Command{certifyCmd(), exploreCmd(), runCmd(), benchCmd(), benchStoreCmd()} {
		if cmd.PreRunE == nil {
			t.Errorf("%s: no PreRunE: its flags are not checked", cmd.Name())
		}
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			switch f.Value.Type() {
			case "int", "int64", "float64", "duration":
			default:
				return
			}
			if _, ok := limitOf(cmd.Name(), f); !ok && !slices.Contains(unbounded, f.Name) {
				t.Errorf("%s --%s (%s): no range in flagLimits", cmd.Name(), f.Name, f.Value.Type())
			}
		})
		// A default is in range: the check applies to what was given.
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if l, ok := limitOf(cmd.Name(), f); ok && f.Value.String() != "0" && f.Value.String() != "0s" {
				if err := l.check(f); err != nil {
					t.Errorf("%s: the default is out of its own range: %v", cmd.Name(), err)
				}
			}
		})
	}
}
