package certifyrun

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/servers/serverfaults"
)

// cases runs the fault-free probe and builds the run's cases from what it
// found: the selection's matrix, the server faults' and the opt-in server
// kinds', the ones the service can take, this shard's share. Nil cases
// end the run with code or err.
func (r *run) cases(runner *sim.Runner) ([]catalogue.Case, int, error) {
	// A fault-free probe run discovers the windows the store declares and
	// measures the worker random kills are drawn over. A probe that fails
	// (the store breaks without any fault) fails the report, beside the
	// matrix.
	r.sel = r.o.Selection
	if why := r.sel.RandomKillsLeftOut(); why != "" {
		fmt.Fprintln(r.o.Stderr, "crashmatrix: --random-kills:", why)
		return nil, 2, nil
	}
	r.probe, r.perr = runner.Probe(r.ctx)
	untested, err := runner.PowerLossSelection(&r.sel)
	if err == nil && r.o.TearGiven && !r.sel.TornWrite {
		err = fmt.Errorf("--tear %d applies to the torn-write column, which this run does not have (it comes with the power-loss column on an embedded backend, or with --kind torn-write where power loss runs)", r.sel.Tear)
	}
	if err != nil {
		code, err := r.setupFailed(err)
		return nil, code, err
	}
	r.untested = untested
	lease := catalogue.Lease(r.o.LeaseTTL)
	cases := r.sel.Cases(r.probe.Probe, lease, r.o.Config.Seed)
	if code, err := r.checkStorePoints(); code != 0 || err != nil {
		return nil, code, err
	}
	points, kinds, classes := r.sel.Points, r.sel.Kinds, r.sel.Classes
	if r.o.Servers != nil {
		// Every window x server fault x server this run can fault, as
		// filtered (a server given by DSN/URI without kill and start
		// commands loses replies and connections, and is not crashed).
		for _, c := range catalogue.Filter(lease.ServerMatrix(), points, kinds, classes) {
			if r.o.Servers.Can(c.Kind, c.Server) {
				cases = append(cases, c)
			}
		}
	}
	optIn, err := optInServerCases(r.o.Stderr, r.o.Servers, r.o.LeaseTTL, points, kinds, classes)
	if err != nil {
		code, err := r.setupFailed(err)
		return nil, code, err
	}
	cases, r.leftOut = runner.ServiceCases(append(cases, optIn...))
	if len(cases) == 0 {
		return nil, 0, fmt.Errorf("no case matches --point %v --kind %v --class %v %v", points, kinds, classes, r.leftOut)
	}
	return r.shardOf(cases)
}

// checkStorePoints refuses a store window --point names that the probe
// run did not reach.
func (r *run) checkStorePoints() (int, error) {
	for _, p := range r.sel.Points {
		if !faults.IsStorePoint(p) || slices.ContainsFunc(r.probe.Windows, func(w catalogue.StoreWindow) bool { return w.Point == p }) {
			continue
		}
		if r.perr != nil {
			// The probe is how store windows are found: one that did not
			// finish says nothing of whether the store declares it.
			fmt.Fprintf(r.o.Stderr, "crashmatrix: --point %s: store windows are unknown, the fault-free probe run did not finish: %v\n", p, r.perr)
			return 2, nil
		}
		found := make([]string, len(r.probe.Windows))
		for i, w := range r.probe.Windows {
			found[i] = string(w.Point)
		}
		return 0, fmt.Errorf("--point %s: the probe run never reached this store window (found: %v); is faults.At called with the context the store method was given?", p, found)
	}
	return 0, nil
}

// shardOf names the matrix by its cases and keeps this shard's share.
func (r *run) shardOf(cases []catalogue.Case) ([]catalogue.Case, int, error) {
	matrix := catalogue.NewMatrixID(r.o.Matrix, cases)
	r.matrixID = &matrix
	if s := r.o.Shard; s != nil {
		if cases = s.Select(cases); len(cases) == 0 {
			return nil, 0, fmt.Errorf("--shard %s: the matrix has only %d cases, so shard %d has none; use at most %d shards", s, len(matrix.Cases), s.Index, len(matrix.Cases))
		}
		r.ropt.Rerun += " --shard " + s.String()
	}
	return cases, 0, nil
}

// optInServerCases are the cases of the opt-in server faults that --kind
// names (server-pause, partition, clock-jump: faults.ServerOptInKinds), on
// every server of the run that can take each, as filtered by --point and
// --class. A server that cannot take one is named on stderr, "not tested
// (why)"; a kind that no server can take is an error (exit 2), as is one
// asked of a run that faults no server (sup nil).
func optInServerCases(stderr io.Writer, sup *serverfaults.Supervisor, leaseTTL time.Duration, points []faults.Point, kinds []faults.Kind, classes []string) ([]catalogue.Case, error) {
	var asked []faults.Kind
	for _, k := range kinds {
		if slices.Contains(faults.ServerOptInKinds, k) {
			asked = append(asked, k)
		}
	}
	if len(asked) == 0 {
		return nil, nil
	}
	if sup == nil {
		return nil, fmt.Errorf("--kind %s: not tested (it acts on a database server: it needs --backend containers, or --postgres-dsn/--neo4j-uri with --server-faults)", asked[0])
	}
	var out []catalogue.Case
	for _, k := range asked {
		var why []string
		n := 0
		for _, c := range catalogue.Filter(catalogue.Lease(leaseTTL).ServerOptInMatrix([]faults.Kind{k}), points, kinds, classes) {
			if w := sup.Untested(k, c.Server); w != "" {
				if !slices.Contains(why, w) {
					why = append(why, w)
				}
				continue
			}
			out = append(out, c)
			n++
		}
		if n == 0 && len(why) > 0 {
			return nil, fmt.Errorf("--kind %s: not tested (%s)", k, strings.Join(why, "; "))
		}
		for _, w := range why {
			fmt.Fprintf(stderr, "crashmatrix: %s on some servers: not tested (%s)\n", k, w)
		}
	}
	return out, nil
}
