// Package cmdkit holds what the commands' runs share below the CLI: the
// command that runs this binary again and the shell quoting of replay
// lines (SelfCommand, ShellQuote), the report files a run writes
// (WriteReports), its progress lines outside a terminal (ProgressLog),
// the workers' lease TTL without a flag (DefaultLeaseTTL), and the Go
// runtime settings a run tunes (TuneGC, TuneProcs).
package cmdkit

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/mattn/go-isatty"
)

// SelfCommand is how a person runs this binary again: the path it was
// started by, or `go run ./cmd/crashmatrix` when `go run` built it into a
// temporary directory that is gone once it exits.
func SelfCommand() string {
	arg0 := os.Args[0]
	if strings.Contains(arg0, "go-build") || strings.HasPrefix(arg0, os.TempDir()+"/go-") {
		return "go run ./cmd/crashmatrix"
	}
	return ShellQuote(arg0)
}

// ShellQuote quotes s for a POSIX shell when it needs it.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == ',' || r == '=' || r == '@' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// WriteReports writes the JSON, JUnit and HTML reports the flags asked
// for ("" skips one) and names each file written.
func WriteReports(out io.Writer, rep verdict.Report, o report.Options, jsonPath, junitPath, htmlPath string) error {
	for _, w := range []struct {
		path  string
		write func(io.Writer, verdict.Report, report.Options) error
	}{{jsonPath, report.WriteJSON}, {junitPath, report.WriteJUnit}, {htmlPath, report.WriteHTML}} {
		if w.path == "" {
			continue
		}
		if err := WriteFile(w.path, func(wr io.Writer) error { return w.write(wr, rep, o) }); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s\n", w.path)
	}
	return nil
}

// WriteFile creates path (and its folder) and writes it with fn.
func WriteFile(path string, fn func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// ProgressLog starts the progress lines of a run (sim.ProgressLog) on out
// when stdout is not a terminal (a CI log, a pipe, a file), and returns
// nil on a terminal, where certify draws a progress bar instead. The
// caller stops it before printing its results.
func ProgressLog(out io.Writer, what, unit string, total int, budget time.Duration) *sim.ProgressLog {
	if isatty.IsTerminal(os.Stdout.Fd()) {
		return nil
	}
	return sim.NewProgressLog(func(line string) { fmt.Fprintln(out, line) }, what, unit, total, budget)
}

// DefaultLeaseTTL picks the workers' lease TTL: the flag's when given;
// else short on the embedded default, longer on servers, whose first
// writes in a fresh process (a new driver, a new pool) can take a good
// part of a second; a live worker that loses its lease to a slow write
// is refused and the fault case is not exercised.
func DefaultLeaseTTL(flag time.Duration, backend string) time.Duration {
	switch {
	case flag > 0:
		return flag
	case backend == "sqlite" || backend == "memory":
		return 250 * time.Millisecond
	default:
		return 600 * time.Millisecond
	}
}
