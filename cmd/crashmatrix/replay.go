package main

import (
	"fmt"
	"strings"

	"github.com/crashmatrix/crashmatrix/internal/cmdkit"
	"github.com/crashmatrix/crashmatrix/sim/servers"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// selfCommand and shellQuote spell replay commands (cmdkit).
var (
	selfCommand = cmdkit.SelfCommand
	shellQuote  = cmdkit.ShellQuote
)

// certifyReplay returns the command that runs a certify run again (the
// same binary, backend, mode, mutants, seed and lease), and the one that
// replays one case of it: narrowed to the case's window and kind (or
// class), with the details printed.
func certifyReplay(f certifyFlags, backend string) (string, func(verdict.CaseResult) string) {
	base := certifyBase(f, backend)
	rerun := base
	if f.store.command != "" && !f.store.conformance {
		rerun = append(rerun, "--conformance=false")
	}
	for _, p := range f.points {
		rerun = append(rerun, "--point", shellQuote(p))
	}
	for _, k := range f.kinds {
		rerun = append(rerun, "--kind", shellQuote(k))
	}
	for _, c := range f.only {
		rerun = append(rerun, "--class", shellQuote(c))
	}
	return strings.Join(rerun, " "), func(r verdict.CaseResult) string {
		args := append([]string(nil), base...)
		if f.store.command != "" {
			// One case again: the conformance suites ran before the
			// matrix (a store that failed them got no matrix).
			args = append(args, "--conformance=false")
		}
		if r.Case.Class != "" {
			args = append(args, "--class", shellQuote(r.Case.Class))
		} else {
			args = append(args, "--point", string(r.Case.Point), "--kind", string(r.Case.Kind))
		}
		return strings.Join(append(args, "-v"), " ")
	}
}

// certifyBase is the command that runs the same matrix again: the same
// binary, backend, servers, mode, mutants, seed and lease, without the
// selection.
func certifyBase(f certifyFlags, backend string) []string {
	base := []string{selfCommand(), "certify"}
	if sa := f.store.replayArgs(); sa != nil {
		base = append(base, sa...)
	} else {
		base = append(base, "--backend", shellQuote(backend))
	}
	base = append(base, f.service.replayArgs()...)
	if f.server.postgresDSN != "" {
		base = append(base, "--postgres-dsn", `"$`+servers.EnvPostgresDSN+`"`)
		if f.server.faults != nil {
			base = append(base, "--server-faults")
			for _, fl := range []struct{ name, cmd string }{{"postgres-kill", f.server.postgresKill}, {"postgres-start", f.server.postgresStart},
				{"neo4j-kill", f.server.neo4jKill}, {"neo4j-start", f.server.neo4jStart}} {
				if fl.cmd != "" {
					base = append(base, "--"+fl.name, shellQuote(fl.cmd))
				}
			}
		}
	}
	if f.inProcess {
		base = append(base, "--in-process")
	}
	if f.inProcessFiles {
		base = append(base, "--in-process-files")
	}
	for _, b := range f.bugs {
		base = append(base, "--bug", shellQuote(b))
	}
	if f.mutant != "" {
		base = append(base, "--mutant", shellQuote(f.mutant))
	}
	if f.seed != 1 {
		base = append(base, "--seed", fmt.Sprint(f.seed))
	}
	if f.leaseTTL > 0 {
		base = append(base, "--lease-ttl", f.leaseTTL.String())
	}
	return base
}
