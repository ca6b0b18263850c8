package catalogue

import (
	"fmt"
	"slices"

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
	base := faults.Crash
	if k.HoldsPastLease() {
		// The window's pause case: the faulted worker runs in the
		// background, so that another worker (recovery) runs while its
		// request is held, and takes the lease over.
		base = faults.Pause
	}
	c, ok := b.WindowCase(p, base)
	if !ok {
		return Case{}, false
	}
	c.ID, c.Kind, c.Server = caseID(string(p), string(k), server), k, server
	if k == faults.ClockJump {
		last := &c.Steps[len(c.Steps)-1]
		last.Resubmit = append(slices.Clone(last.Resubmit), "competitor")
	}
	what := map[faults.Kind]string{
		faults.ServerCrash: "the " + server + " server is killed (SIGKILL) and restarted on its data",
		faults.AckLost:     "the next write to " + server + " commits and its reply is lost (connection cut)",
		faults.ConnReset:   "the next connection to " + server + " is cut before its request arrives",
		faults.ServerPause: "the " + server + " server is stopped (SIGSTOP) while the worker's next request goes out to it, held past the lease, then resumed (SIGCONT) as recovery takes the lease over",
		faults.Partition:   "the worker's connections to " + server + " are held silent past the lease while recovery reaches the server and takes the lease over, then the partition heals and the worker's held request arrives",
		faults.ClockJump:   "the " + server + " server's clock (now()) jumps forward past the lease while the worker holds it, then back",
	}[k]
	c.Description = fmt.Sprintf("%s at %q (%s): %s; recovery must: %s", k, spec.Step, spec.Window, what, spec.Recovery)
	for i := range c.Steps {
		if _, armed := c.Steps[i].Arms[p]; armed && c.Steps[i].Worker == "fault" {
			c.Steps[i].Arms[p] = faults.Action{Kind: k, Hit: 1, Server: server}
			if k == faults.ClockJump {
				c.Steps = slices.Insert(c.Steps, i+1, clockJumpCompetitor())
			}
			break
		}
	}
	return c, true
}

// clockJumpCompetitor is the worker of a clock-jump case that asks for
// the faulted worker's lease while the server's clock is ahead: another
// version of d4, the document the worker holds at its first hit of every
// window (the standard script's first, and the one recovery resumes). A
// lock provider on the caller's clock refuses it until the holder's lease
// expired; one on the server's clock grants it at once, to a second live
// holder. The final step resubmits what it left unfinished.
func clockJumpCompetitor() Step {
	return Step{Worker: "competitor", Actions: []Action{{Do: "ingest", Doc: "d4", Content: DocD1v2}}, ContinueOnError: true}
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

// ServerOptInMatrix returns the cases of the opt-in server faults
// (faults.ServerOptInKinds) that kinds names, at every window and server
// where each applies: a run has them only when asked for by --kind.
func (b Builder) ServerOptInMatrix(kinds []faults.Kind) []Case {
	var out []Case
	for _, s := range faults.Catalogue {
		for _, k := range faults.ServerOptInKinds {
			if !slices.Contains(kinds, k) {
				continue
			}
			for _, srv := range faults.Servers {
				if c, ok := b.ServerWindowCase(s.Point, k, srv); ok {
					out = append(out, c)
				}
			}
		}
	}
	return out
}
