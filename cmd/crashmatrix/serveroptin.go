package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/servers/serverfaults"
)

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
