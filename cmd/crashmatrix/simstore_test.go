package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// explore --sim-store refuses what the simulated store cannot stand for.
func TestExploreSimStoreRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sim-store", "--processes"}, "--sim-store runs in process"},
		{[]string{"--sim-store", "--in-process-files"}, "drop --in-process-files"},
		{[]string{"--sim-store", "--backend", "memory"}, "replays its findings on SQLite"},
		{[]string{"--sim-store", "--mutant", "no-unique-constraint"}, "models create-instead-of-merge only"},
	} {
		cmd := exploreCmd()
		cmd.SetArgs(append(tc.args, "--max", "1", "--workdir", t.TempDir()))
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("explore %v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

// A finding of the simulated store says so, in the output and in the
// scenario file, with how often it broke on the real store; the scenario
// replays on SQLite.
func TestExploreSimStoreLabelsItsFinding(t *testing.T) {
	out := t.TempDir()
	cmd := exploreCmd()
	var stdout bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stdout)
	cmd.SetArgs([]string{"--sim-store", "--bug", "skip-revision-check", "--invariant", "I2", "--seed", "1", "--budget", "60s", "--out", out, "--workdir", t.TempDir()})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	var ee exitError
	if err := cmd.Execute(); !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("explore --sim-store on skip-revision-check: %v, want exit 1 (a finding)\n%s", err, stdout.String())
	}
	got := stdout.String()
	for _, want := range []string{"backend sim-store", "SIMULATED durable store", "VIOLATION (simulated store) I2", "replayed on the real store (SQLite, in-process): breaks I2 there in 10 of 10 runs"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	files, _ := filepath.Glob(filepath.Join(out, "*.yaml"))
	if len(files) != 1 {
		t.Fatalf("scenario files %v, want one", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "# Found on the simulated durable store (--sim-store) and replayed on the real store") || !strings.Contains(string(b), "--sim-store") {
		t.Errorf("the scenario file does not say it was found on the simulated store:\n%s", b)
	}
	if strings.Contains(string(b), "--backend") {
		t.Errorf("the scenario's replay does not run on SQLite:\n%s", b)
	}
}
