package main

import (
	"strings"
	"testing"
)

// Random-instant kills need real worker processes, and their counts must
// make sense: the commands say so instead of running something else.
func TestRandomKillFlagsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"certify", "--random-kills", "3", "--in-process"}, "--random-kills needs real worker processes"},
		{[]string{"certify", "--random-kills", "-1"}, "--random-kills -1: want at least 0"},
		{[]string{"explore", "--random-kills", "0.5"}, "--random-kills needs --processes"},
		{[]string{"explore", "--random-kills", "2", "--processes"}, "want between 0 and 1 (a share)"},
		{[]string{"certify", "--point", "mystore/bad/name"}, `store window "mystore/bad/name"`},
		{[]string{"certify", "--point", "mystore/afterRow", "--in-process", "--quiet", "--workdir", t.TempDir()}, "the probe run never reached this store window"},
	} {
		cmd := certifyCmd()
		if tc.args[0] == "explore" {
			cmd = exploreCmd()
		}
		cmd.SetArgs(tc.args[1:])
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}
