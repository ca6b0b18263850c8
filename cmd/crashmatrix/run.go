package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/crashmatrix/crashmatrix/internal/scenariorun"
	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/servers"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// runFlags are run's flags.
type runFlags struct {
	backend, workdir, html, jsonOut, junitOut string
	store                                     storeCmdFlags
	service                                   serviceCmdFlags
	inProcess, library, files, details, keep  bool
	repeat                                    int
	server                                    serverFlags
}

func runCmd() *cobra.Command {
	var f runFlags
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
		RunE: func(cmd *cobra.Command, args []string) error { return runScenarios(cmd, &f, args) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.backend, "backend", "sqlite", "backend (a scenario naming another backend is skipped)")
	f.store.register(fl, false)
	f.service.register(fl)
	fl.BoolVar(&f.inProcess, "in-process", false, "simulate crashes in-process instead of killing processes")
	fl.BoolVar(&f.files, "in-process-files", false, "keep the embedded database in a file in the in-process mode too (by default it lives in memory there)")
	fl.BoolVar(&f.library, "library", false, "run the built-in scenario library")
	fl.IntVar(&f.repeat, "repeat", 1, "replay each scenario N times; all must agree (the replays of a wall-clock kill, a kill: block, are counted instead: timing decides where it lands)")
	fl.StringVar(&f.workdir, "workdir", "", "where histories go, one run at a time (a second run on the folder exits 2) (default: a temporary folder, removed when every scenario met its expectation, under TMPDIR when set, else on /dev/shm when it has 1 GiB free)")
	fl.BoolVar(&f.keep, "keep", false, "keep the histories even when every scenario met its expectation")
	fl.StringVar(&f.html, "html", "", "write the self-contained HTML report here (the scenarios' verdicts, violations and timelines)")
	fl.StringVar(&f.jsonOut, "json", "", "write the JSON report here")
	fl.StringVar(&f.junitOut, "junit", "", "write JUnit XML here")
	fl.BoolVarP(&f.details, "details", "v", false, "print each scenario's violations with their evidence, its history and its replay command")
	f.server.register(fl)
	cmd.PreRunE = checkFlags
	return cmd
}

// runScenarios is run: the files (and --library) loaded, the backend set
// up, then scenariorun.Run.
func runScenarios(cmd *cobra.Command, f *runFlags, args []string) error {
	release, err := lockWorkdir(cmd, f.workdir)
	if err != nil {
		return err
	}
	defer release()
	o := scenariorun.Options{Repeat: f.repeat, WorkDir: f.workdir, Keep: f.keep, Details: f.details, JSON: f.jsonOut, JUnit: f.junitOut,
		HTML: f.html, Stderr: cmd.ErrOrStderr()}
	if o.Scenarios, o.Paths, err = loadScenarios(cmd, f.library, args); err != nil {
		return err
	}
	svc, err := f.service.spec(f.inProcess)
	if err != nil {
		return err
	}
	spec, backend, self, cleanup, err := setUpBackend(cmd, &f.server, &f.store, f.backend, f.inProcess)
	if err != nil {
		return err
	}
	defer cleanup()
	if f.store.command != "" {
		f.backend = backend // --backend's value, in the rerun command too
	}
	o.Backend, o.Want = backend, f.backend
	o.Rerun = strings.Join(append([]string{selfCommand()}, rerunArgs(cmd)...), " ")
	o.Config = sim.Config{Backend: spec, Launcher: sim.BinaryLauncher{Path: self}, InProcess: f.inProcess, InProcessFiles: f.files, Service: svc}
	f.server.useFaults(&o.Config)
	f.store.useRecovery(&o.Config)
	o.Replay = func(path string) string {
		return runReplay(path, f.backend, f.inProcess, f.files, f.store.replayArgs()...)
	}
	return exitWith(scenariorun.Run(cmd.Context(), o, cmd.OutOrStdout()))
}

// loadScenarios loads the scenario files (and with library the built-in
// library), each with the path its replay command names. A file that
// does not load ends the command with exit code 2.
func loadScenarios(cmd *cobra.Command, library bool, args []string) ([]*scenarios.Scenario, map[*scenarios.Scenario]string, error) {
	var scs []*scenarios.Scenario
	var loadErrs []error
	paths := map[*scenarios.Scenario]string{}
	if library {
		lib, err := scenarios.Library()
		if err != nil {
			return nil, nil, err
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
		return nil, nil, exitError{2}
	}
	if len(scs) == 0 {
		return nil, nil, fmt.Errorf("no scenario given (pass files or --library)")
	}
	return scs, paths, nil
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
