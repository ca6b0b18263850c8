package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/report"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/servers"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func runCmd() *cobra.Command {
	var backendName, workdir, html, jsonOut, junitOut string
	var store storeCmdFlags
	var service serviceCmdFlags
	var inProcess, library, files, details, keep bool
	var repeat int
	var server serverFlags
	cmd := &cobra.Command{
		Use:   "run FILE...",
		Args:  cobra.ArbitraryArgs,
		Short: "Replay scenario files and judge each against its expected verdict",
		Long: `run loads scenario files (YAML, see scenarios/SCHEMA.md), replays each one
deterministically and compares the outcome with the scenario's expect block.
--library runs the built-in scenario library. --repeat N replays each scenario
N times and requires the same verdict and the same history every time.

Exit code: 0 every scenario met its expectation, 1 one did not, 2 a file did
not load, a run was undecided, or a setup the run cannot vouch for (a flag
empty, out of range or for another backend; a --workdir another run is using).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			release, err := lockWorkdir(cmd, workdir)
			if err != nil {
				return err
			}
			defer release()
			var scs []*scenarios.Scenario
			var loadErrs []error
			// Where each scenario's file is, for its replay command.
			paths := map[*scenarios.Scenario]string{}
			if library {
				lib, err := scenarios.Library()
				if err != nil {
					return err
				}
				for _, s := range lib {
					paths[s] = "scenarios/library/" + s.Name + ".yaml"
				}
				scs = append(scs, lib...)
			}
			for _, a := range args {
				s, err := scenarios.Load(a)
				if err != nil {
					loadErrs = append(loadErrs, err)
					continue
				}
				paths[s] = a
				scs = append(scs, s)
			}
			if len(loadErrs) > 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), errors.Join(loadErrs...))
				return exitError{2}
			}
			if len(scs) == 0 {
				return fmt.Errorf("no scenario given (pass files or --library)")
			}
			spec, err := store.spec(inProcess)
			if err != nil {
				return err
			}
			svc, err := service.spec(inProcess)
			if err != nil {
				return err
			}
			backend, self, cleanup, err := server.setUp(cmd, backendName)
			if err != nil {
				return err
			}
			defer cleanup()
			if spec.Name == "" {
				spec.Name = backend
			} else {
				backend, backendName = spec.Name, spec.Name
			}
			// Histories are kept when a scenario did not meet its
			// expectation, or when asked (--keep, --workdir, -v, which
			// prints their paths); any other way out removes a
			// temporary folder, errors included.
			kept := keep || details || workdir != ""
			if workdir == "" {
				root := sim.CaseRoot()
				if workdir, err = os.MkdirTemp(root, "crashmatrix-run-"); err != nil {
					return err
				}
				defer func() {
					if !kept {
						_ = os.RemoveAll(workdir)
					}
				}()
			}
			mode := "process kills"
			if inProcess {
				mode = "in-process"
			}
			var all []verdict.CaseResult
			replays := map[string]string{}
			rep := verdict.Report{Backend: backend, Started: time.Now(), Seed: -1}
			code := 0
			// A line at each tenth of the scenarios and every 10 s outside a
			// terminal; on one, the line of each scenario says as much.
			progress := func(failed bool) {}
			plog := progressLog(out, "run", "scenarios", len(scs), 0)
			if plog != nil {
				defer plog.Stop() // a return inside the loop
				progress = plog.Done
			}
			for _, s := range scs {
				if err := s.CheckBackend(backendName); err != nil && s.Backend != "" {
					fmt.Fprintf(out, "SKIP  %-45s %v\n", s.Name, err)
					progress(false)
					continue
				}
				cfg := s.Apply(sim.Config{Backend: spec, Launcher: sim.BinaryLauncher{Path: self},
					WorkDir: filepath.Join(workdir, s.Name), InProcess: inProcess, InProcessFiles: files, Seed: 1, Service: svc})
				server.useFaults(&cfg)
				store.useRecovery(&cfg)
				if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil { // a service's declarations are learnt in it
					return err
				}
				runner, err := sim.NewRunner(cfg)
				if err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), "crashmatrix:", err)
					return exitError{2}
				}
				rep.Upgrade = runner.UpgradeLine()
				if rep.Seed == -1 {
					rep.Seed = runner.Config().Seed
				} else if rep.Seed != runner.Config().Seed {
					rep.Seed = 0 // scenarios with different seeds: each file names its own
				}
				if cfg.Mutant != "" && !slices.Contains(strings.Split(rep.Mutant, ","), cfg.Mutant) {
					rep.Mutant = strings.Trim(rep.Mutant+","+cfg.Mutant, ",")
				}
				for _, b := range cfg.Bugs {
					if !slices.Contains(rep.Bugs, string(b)) {
						rep.Bugs = append(rep.Bugs, string(b))
					}
				}
				var first verdict.CaseResult
				var firstTrace []string
				same := "ok"
				// A wall-clock kill lands where the worker's timing puts
				// it: its replays are counted, not required to agree (a
				// random kill at a store call or commit is a crash like
				// any other, and must agree).
				killed := slices.ContainsFunc(s.Steps, func(st scenarios.Step) bool { return st.Kill != nil })
				reproduced := 0
				for i := 0; i < max(repeat, 1); i++ {
					res := runner.RunCase(cmd.Context(), s.Case())
					if killed && s.JudgeResult(res) == nil {
						reproduced++
					}
					if i == 0 {
						first, firstTrace = res, history.Trace(res.Timeline)
						replays[res.Case.ID] = runReplay(paths[s], backendName, inProcess, files, store.replayArgs()...)
						continue
					}
					if killed {
						continue
					}
					if res.Verdict != first.Verdict || !slices.Equal(res.Broken(), first.Broken()) {
						same = fmt.Sprintf("run %d gave %s %v, run 1 gave %s %v", i+1, res.Verdict, res.Broken(), first.Verdict, first.Broken())
						break
					}
					if tr := history.Trace(res.Timeline); !slices.Equal(tr, firstTrace) {
						same = fmt.Sprintf("run %d's history differs from run 1's at record %d", i+1, firstDiff(tr, firstTrace))
						break
					}
				}
				runner.CloseShared()
				if err := report.SaveTimeline(cfg.WorkDir, &first); err != nil {
					return err
				}
				all = append(all, first)
				jerr := s.JudgeResult(first)
				if killed && reproduced > 0 {
					jerr = nil // judged over all replays below
				}
				// The reports judge the scenario as this line does.
				expect := &verdict.Expectation{}
				all[len(all)-1].Expect = expect
				switch {
				case first.Verdict == verdict.Undecided:
					expect.Note = "undecided: " + strings.Join(first.Notes, "; ")
					fmt.Fprintf(out, "UNDEC %-45s %s\n", s.Name, strings.Join(first.Notes, "; "))
					code = max(code, 2)
				case jerr != nil:
					expect.Note = jerr.Error()
					fmt.Fprintf(out, "FAIL  %-45s %v\n", s.Name, jerr)
					code = max(code, 1)
				case same != "ok":
					expect.Note = "not deterministic: " + same
					fmt.Fprintf(out, "FAIL  %-45s not deterministic: %s\n", s.Name, same)
					code = max(code, 1)
				default:
					broke := "all invariants held"
					if b := first.Broken(); len(b) > 0 {
						broke = "broke " + strings.Join(b, ",") + " as expected"
					}
					if killed {
						broke = fmt.Sprintf("wall-clock kill: %d of %d replays matched the expectation", reproduced, max(repeat, 1))
					}
					expect.Met, expect.Note = true, broke
					fmt.Fprintf(out, "ok    %-45s %s %s (%s, %dx %s)\n", s.Name, first.Verdict, broke, first.Took.Round(time.Millisecond), max(repeat, 1), mode)
				}
				if details {
					printCase(out, first, replays[first.Case.ID])
				}
				progress(first.Verdict != verdict.Undecided && (jerr != nil || same != "ok"))
			}
			if plog != nil {
				plog.Stop()
			}
			kept = kept || code != 0
			rep.Results, rep.Took = all, time.Since(rep.Started)
			if rep.Seed < 0 {
				rep.Seed = 0
			}
			rep.Finish()
			ropt := report.Options{Command: "run", Details: details, Replay: func(r verdict.CaseResult) string { return replays[r.Case.ID] },
				Rerun: strings.Join(append([]string{selfCommand()}, rerunArgs(cmd)...), " ")}
			if err := writeReports(out, rep, ropt, jsonOut, junitOut, html); err != nil {
				return err
			}
			if kept {
				fmt.Fprintf(out, "histories: %s\n", workdir)
			}
			if code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&backendName, "backend", "sqlite", "backend (a scenario naming another backend is skipped)")
	store.register(fl, false)
	service.register(fl)
	fl.BoolVar(&inProcess, "in-process", false, "simulate crashes in-process instead of killing processes")
	fl.BoolVar(&files, "in-process-files", false, "keep the embedded database in a file in the in-process mode too (by default it lives in memory there)")
	fl.BoolVar(&library, "library", false, "run the built-in scenario library")
	fl.IntVar(&repeat, "repeat", 1, "replay each scenario N times; all must agree (the replays of a wall-clock kill, a kill: block, are counted instead: timing decides where it lands)")
	fl.StringVar(&workdir, "workdir", "", "where histories go, one run at a time (a second run on the folder exits 2) (default: a temporary folder, removed when every scenario met its expectation, under TMPDIR when set, else on /dev/shm when it has 1 GiB free)")
	fl.BoolVar(&keep, "keep", false, "keep the histories even when every scenario met its expectation")
	fl.StringVar(&html, "html", "", "write the self-contained HTML report here (the scenarios' verdicts, violations and timelines)")
	fl.StringVar(&jsonOut, "json", "", "write the JSON report here")
	fl.StringVar(&junitOut, "junit", "", "write JUnit XML here")
	fl.BoolVarP(&details, "details", "v", false, "print each scenario's violations with their evidence, its history and its replay command")
	server.register(fl)
	cmd.PreRunE = checkFlags
	return cmd
}

// rerunArgs are the arguments this command was given (flags and files),
// quoted for a shell, minus the report outputs.
func rerunArgs(cmd *cobra.Command) []string {
	args := []string{cmd.Name()}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		switch {
		case f.Name == "html" || f.Name == "json" || f.Name == "junit" || f.Name == "workdir" || f.Name == "neo4j-password":
			return // outputs, scratch space and secrets stay out of reports
		case f.Name == "postgres-dsn":
			args = append(args, "--"+f.Name, `"$`+servers.EnvPostgresDSN+`"`)
		case f.Value.Type() == "bool" && f.Value.String() == "true":
			args = append(args, "--"+f.Name)
		default:
			args = append(args, "--"+f.Name+"="+shellQuote(f.Value.String()))
		}
	})
	for _, a := range cmd.Flags().Args() {
		args = append(args, shellQuote(a))
	}
	return args
}

// runReplay is the command that replays one scenario file as this run
// did; storeArgs name its store commands (storeCmdFlags.replayArgs), which
// name the backend.
func runReplay(file, backend string, inProcess, inFiles bool, storeArgs ...string) string {
	if file == "" {
		return ""
	}
	args := []string{selfCommand(), "run", shellQuote(file)}
	switch {
	case len(storeArgs) > 0:
		args = append(args, storeArgs...)
	case backend != "sqlite":
		args = append(args, "--backend", shellQuote(backend))
	}
	if inProcess {
		args = append(args, "--in-process")
	}
	if inFiles {
		args = append(args, "--in-process-files")
	}
	return strings.Join(append(args, "-v"), " ")
}

// printCase prints one scenario's outcome in detail: why it was not
// exercised, its notes, every violation with evidence, its history and
// its replay command.
func printCase(out io.Writer, r verdict.CaseResult, replay string) {
	if r.Verdict == verdict.NotExercised {
		fmt.Fprintf(out, "      not exercised: %s\n", r.WhyNotExercised())
	}
	for _, n := range r.Notes {
		fmt.Fprintf(out, "      note: %s\n", n)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(out, "      %s\n", v)
		for _, e := range v.Evidence {
			fmt.Fprintf(out, "          %s\n", e)
		}
	}
	fmt.Fprintf(out, "      history: %s\n", report.HistoryPath(r))
	if logs := r.StoreLogs(); logs != "" {
		fmt.Fprintf(out, "      store logs: %s\n", logs)
	}
	if replay != "" {
		fmt.Fprintf(out, "      replay:  %s\n", replay)
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i + 1
		}
	}
	return min(len(a), len(b)) + 1
}
