package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/storecmd"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// A run that cannot vouch for its own setup exits 2 before it runs
// anything: checkFlags, the PreRunE of every command that runs cases,
// refuses a number out of range, a store or server named by a blank value
// (an unset variable in a CI job), a flag that does not apply to the
// backend or the execution mode chosen, and a backend mutant the backend
// does not honour. Only what was given on the command line is checked: a
// default is in range by construction, or means "not given" (explore
// --parallel 0, the lease TTL's 0).

// limit is the range a numeric flag takes (inclusive).
type limit struct {
	min float64
	max float64 // 0: no upper bound
	// whole: a duration must be a whole number of these (the lease TTLs
	// reach the workers in milliseconds: 1500µs would silently be 1ms and
	// under 1ms would be no TTL at all).
	whole time.Duration
	// what the value is, for the message.
	what string
}

// flagLimits are the ranges of every numeric flag of every command, by
// name, by name:type where two commands give one name to different things
// (certify's --random-kills counts kills, explore's is a share), or by
// command/name where one command's differs.
// TestEveryNumericFlagHasALimit keeps it complete.
var flagLimits = map[string]limit{
	"parallel":             {min: 1, what: "how many run at once"},
	"cycle-parallel":       {min: 1, what: "how many cycles run at once"},
	"random-kills:int":     {min: 0, what: "a count of random kills"},
	"random-kills:float64": {min: 0, max: 1, what: "a share"},
	"power-loss":           {min: 0, max: 1, what: "a share"},
	"torn-write":           {min: 0, max: 1, what: "a share"},
	"disk-errors":          {min: 0, max: 1, what: "a share"},
	"server-holds":         {min: 0, max: 1, what: "a share"},
	"lease-ttl":            {min: float64(time.Millisecond), whole: time.Millisecond, what: "the workers' leases count whole milliseconds"},
	"cycle-lease-ttl":      {min: float64(time.Millisecond), whole: time.Millisecond, what: "the workers' leases count whole milliseconds"},
	"store-timeout":        {min: float64(time.Millisecond), what: "how long a store process may take per message"},
	"service-timeout":      {min: float64(time.Millisecond), what: "how long a service process may stay silent"},
	"budget":               {min: float64(time.Millisecond), what: "how long to search"},
	"explore:duration":     {min: 0, what: "how long each exploration rate is measured (0 skips them)"},
	"explore:int":          {min: 0, what: "a number of exploration schedules (0 turns the exploration off)"},
	"max":                  {min: 0, what: "a number of schedules (0: the budget only)"},
	"confirm":              {min: 1, what: "a number of re-runs"},
	"repeat":               {min: 1, what: "a number of replays"},
	"rounds":               {min: 0, what: "a number of rounds (0: the cost per call only)"},
	"bench/rounds":         {min: 1, what: "a number of full-matrix rounds"},
	"cycles":               {min: 0, what: "a number of cycles (0 skips them)"},
	"restarts":             {min: 1, what: "a number of restarts"},
	"calls":                {min: 1, what: "a number of store calls"},
	"target":               {min: 1, what: "a ratio to the Go SQLite matrix (1 is as fast)"},
	"certify:duration":     {min: 0, what: "a target for the whole certify (0: not run)"},
}

// unbounded are numeric flags any value of which is meaningful, or that
// a check of their own refuses more precisely (--tear: faults.CheckTear,
// a power of two).
var unbounded = []string{"seed", "explore-seed", "tear"}

// notBlank are the string flags that name a store, a server or a command
// to run: given, they must say something. `--store-cmd "$STORE"` with
// STORE unset would otherwise certify the built-in SQLite store.
var notBlank = []string{"store-cmd", "plansave-cmd", "service-cmd", "recover-store-cmd", "postgres-dsn", "neo4j-uri",
	"postgres-kill", "postgres-start", "neo4j-kill", "neo4j-start", "postgres-image", "neo4j-image", "workdir"}

// backendFlags are the flags that apply to some backends only, and the
// backends they apply to (--backend's value, store-cmd when a store
// command is given, postgres when --postgres-dsn picks it).
var backendFlags = map[string][]string{
	"postgres-dsn":        {"postgres"},
	"neo4j-uri":           {"postgres"},
	"neo4j-user":          {"postgres"},
	"neo4j-password":      {"postgres"},
	"allow-nondisposable": {"postgres"},
	"postgres-kill":       {"postgres"},
	"postgres-start":      {"postgres"},
	"neo4j-kill":          {"postgres"},
	"neo4j-start":         {"postgres"},
	"postgres-image":      {"containers"},
	"neo4j-image":         {"containers"},
	"postgres-config":     {"containers"},
	"server-faults":       {"postgres", "containers"},
	"store-timeout":       {storecmd.Name},
	"recover-store-cmd":   {storecmd.Name},
	"conformance":         {storecmd.Name},
	"conformance-run":     {storecmd.Name},
	"in-process-files":    {"sqlite"},
}

// mutantBackends are the backends that honour each backend mutant: any
// other certifies its store unchanged under the mutant's name. A store run
// by --store-cmd gets the name in hello and may honour it.
var mutantBackends = map[string][]string{
	sim.MutantCreateNotMerge:       {"sqlite", "postgres", "containers", storecmd.Name},
	sim.MutantNoUniqueConstraint:   {"sqlite", "postgres", "containers", storecmd.Name},
	sim.MutantLostCommitIsFailure:  {"postgres", "containers"},
	sim.MutantSynchronousOff:       {"sqlite"},
	sim.MutantRenewIgnoresHolder:   {"sqlite", "postgres", "containers"},
	sim.MutantServerClockLease:     {"postgres", "containers"},
	sim.MutantTwoTransactionCreate: {"postgres", "containers"},
}

// modeFlags are the flags that apply in one execution mode only: set
// (true), flag needs the boolean flag mode to be want.
var modeFlags = []struct {
	flag, mode string
	want       bool
	why        string
}{
	{"wall-clock", "in-process", false, "in-process workers run on simulated time"},
	{"in-process-files", "in-process", true, "worker processes keep the embedded database in files anyway"},
	{"in-process-files", "processes", false, "worker processes keep the embedded database in files anyway"},
}

// needsFlag are flags read only with another one: the Neo4j user and
// password go to the server --neo4j-uri names, and are dropped without it.
var needsFlag = map[string]string{
	"neo4j-user":        "neo4j-uri",
	"neo4j-password":    "neo4j-uri",
	"recover-store-cmd": "store-cmd",
}

// checkFlags is the PreRunE of every command that runs cases.
func checkFlags(cmd *cobra.Command, _ []string) error {
	fl := cmd.Flags()
	var err error
	fl.Visit(func(f *pflag.Flag) {
		if err == nil {
			err = checkFlag(cmd.Name(), f)
		}
	})
	if err != nil {
		return err
	}
	if err := checkBackendFlags(fl); err != nil {
		return err
	}
	return checkModeFlags(fl)
}

// checkModeFlags refuses a flag set for another execution mode than the
// one the command runs in, or given without the flag it goes with.
func checkModeFlags(fl *pflag.FlagSet) error {
	for name, needs := range needsFlag {
		if f, n := fl.Lookup(name), fl.Lookup(needs); f != nil && n != nil && f.Changed && !n.Changed {
			return fmt.Errorf("--%s applies with --%s only (it would be ignored)", name, needs)
		}
	}
	for _, m := range modeFlags {
		f, mode := fl.Lookup(m.flag), fl.Lookup(m.mode)
		if f == nil || mode == nil || !f.Changed || f.Value.String() != "true" || mode.Value.String() == strconv.FormatBool(m.want) {
			continue
		}
		if m.want {
			return fmt.Errorf("--%s applies with --%s only (%s)", m.flag, m.mode, m.why)
		}
		return fmt.Errorf("--%s does not apply with --%s (%s)", m.flag, m.mode, m.why)
	}
	return nil
}

// checkFlag checks one flag of command given on the command line.
func checkFlag(command string, f *pflag.Flag) error {
	if slices.Contains(notBlank, f.Name) && strings.TrimSpace(f.Value.String()) == "" {
		return fmt.Errorf("--%s %q: empty (an unset variable?); give a value, or leave the flag out", f.Name, f.Value.String())
	}
	if l, ok := limitOf(command, f); ok {
		return l.check(f)
	}
	return nil
}

// limitOf is the range of command's flag f.
func limitOf(command string, f *pflag.Flag) (limit, bool) {
	for _, key := range []string{command + "/" + f.Name, f.Name + ":" + f.Value.Type(), f.Name} {
		if l, ok := flagLimits[key]; ok {
			return l, true
		}
	}
	return limit{}, false
}

// check says why f's value is out of l.
func (l limit) check(f *pflag.Flag) error {
	s := f.Value.String()
	var v float64
	show := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	switch f.Value.Type() {
	case "duration":
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("--%s %s: %w", f.Name, s, err)
		}
		v = float64(d)
		show = func(x float64) string { return time.Duration(x).String() }
	case "int", "int64", "float64":
		var err error
		if v, err = strconv.ParseFloat(s, 64); err != nil {
			return fmt.Errorf("--%s %s: %w", f.Name, s, err)
		}
	default:
		return nil
	}
	switch {
	case math.IsNaN(v) || v < l.min || l.max > 0 && v > l.max:
		want := "at least " + show(l.min)
		if l.max > 0 {
			want = "between " + show(l.min) + " and " + show(l.max)
		}
		return fmt.Errorf("--%s %s: want %s (%s)", f.Name, s, want, l.what)
	case l.whole > 0 && int64(v)%int64(l.whole) != 0:
		return fmt.Errorf("--%s %s: want a whole number of %s (%s)", f.Name, s, l.whole, l.what)
	}
	return nil
}

// forBackends names the backends a flag is for.
func forBackends(on []string) string {
	if slices.Equal(on, []string{storecmd.Name}) {
		return "a store run by --store-cmd"
	}
	return "--backend " + strings.Join(on, " or ")
}

// checkBackendFlags refuses a flag given for another backend than the one
// the command runs on: --backend memory --postgres-dsn … would certify
// the memory store and print the address in every replay line.
func checkBackendFlags(fl *pflag.FlagSet) error {
	b := fl.Lookup("backend")
	if b == nil {
		return nil
	}
	backend, how := b.Value.String(), "--backend "+b.Value.String()
	if !b.Changed {
		how = "the default backend " + backend
	}
	for _, store := range []string{"store-cmd", "plansave-cmd"} {
		if f := fl.Lookup(store); f != nil && f.Changed {
			if b.Changed && backend != storecmd.Name && backend != "sqlite" {
				return fmt.Errorf("--%s names the backend itself (%s): drop --backend %s", store, storecmd.Name, backend)
			}
			backend, how = storecmd.Name, "--"+store
			break
		}
	}
	if dsn := fl.Lookup("postgres-dsn"); dsn != nil && dsn.Changed && !b.Changed && backend == "sqlite" {
		backend, how = "postgres", "--postgres-dsn"
	}
	var err error
	fl.Visit(func(f *pflag.Flag) {
		if on, ok := backendFlags[f.Name]; ok && err == nil && !slices.Contains(on, backend) {
			err = fmt.Errorf("--%s does not apply to %s (it is for %s): drop one of them", f.Name, how, forBackends(on))
		}
	})
	if m := fl.Lookup("mutant"); err == nil && m != nil && m.Value.String() != "" {
		name := m.Value.String()
		on, known := mutantBackends[name]
		switch {
		case !known:
			names := slices.Sorted(maps.Keys(mutantBackends))
			err = fmt.Errorf("--mutant %q: unknown (known: %s)", name, strings.Join(names, ", "))
		case !slices.Contains(on, backend):
			err = fmt.Errorf("--mutant %s does not apply to %s, which would run unchanged (it is for %s)", name, how, forBackends(on))
		}
	}
	return err
}
