package catalogue

import (
	"fmt"

	"github.com/crashmatrix/crashmatrix/faults"
)

// ServerWindowCase builds the case for one window and one server fault
// (server-crash, ack-lost, conn-reset) against server ("postgres",
// "neo4j"); ok is false when it does not apply there. The case is the
// window's crash case with the server fault armed in place of the kill:
// the worker is not killed, it sees its server fail (or its reply lost)
// and goes on; recovery and the final quiesce follow as usual.
func (b Builder) ServerWindowCase(p faults.Point, k faults.Kind, server string) (Case, bool) {
	spec, found := faults.Lookup(p)
	if !found || !spec.AppliesServer(k, server) {
		return Case{}, false
	}
	c, ok := b.WindowCase(p, faults.Crash)
	if !ok {
		return Case{}, false
	}
	c.ID, c.Kind, c.Server = caseID(string(p), string(k), server), k, server
	what := map[faults.Kind]string{
		faults.ServerCrash: "the " + server + " server is killed (SIGKILL) and restarted on its data",
		faults.AckLost:     "the next write to " + server + " commits and its reply is lost (connection cut)",
		faults.ConnReset:   "the next connection to " + server + " is cut before its request arrives",
	}[k]
	c.Description = fmt.Sprintf("%s at %q (%s): %s; recovery must: %s", k, spec.Step, spec.Window, what, spec.Recovery)
	for i := range c.Steps {
		if _, armed := c.Steps[i].Arms[p]; armed && c.Steps[i].Worker == "fault" {
			c.Steps[i].Arms[p] = faults.Action{Kind: k, Hit: 1, Server: server}
		}
	}
	return c, true
}

// ServerMatrix returns every window x server fault x server that applies:
// the cases a server backend adds when its servers may be faulted.
func (b Builder) ServerMatrix() []Case {
	var out []Case
	for _, s := range faults.Catalogue {
		for _, k := range faults.ServerKinds {
			for _, srv := range faults.Servers {
				if c, ok := b.ServerWindowCase(s.Point, k, srv); ok {
					out = append(out, c)
				}
			}
		}
	}
	return out
}
