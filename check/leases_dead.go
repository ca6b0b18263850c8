package check

import (
	"fmt"

	"github.com/crashmatrix/crashmatrix/history"
)

// DeadHolderBound is the instant after which no lease of a holder that
// stopped at ended (its process ended, or it stalled at a paused failpoint;
// TTL ttl, milliseconds) can still be live: the holder may have renewed
// its lease just before it stopped (until ended+ttl)
// or, under a split-lease fault, been granted it on top of another live
// one (until ended+2*ttl); another TTL (at least 250ms) of margin on top
// makes a refusal after the bound one that no lease the provider was
// asked for explains.
func DeadHolderBound(ended, ttl int64) int64 {
	return ended + 2*ttl + max(ttl, 250)
}

// checkDeadHolders (I7): an expired lease passes on. A worker refused by
// the lease of a holder that had stopped (its process ended, or it stalled
// at a paused failpoint and had not gone on), later than
// DeadHolderBound, waited for a lease that the lock provider never handed
// over: the provider keeps leases past their expiry (or never lets them
// expire). One violation per lease; it explains the case's other
// findings (operations left unfinished behind the wedged document).
func checkDeadHolders(o Observed) []Violation {
	var out []Violation
	seen := map[string]bool{}
	// The log itself, not Observations: that copies every observation
	// of the case to find the rare dead-holder one.
	for i, r := range o.Log {
		if r.Kind != history.Seen || r.Obs == nil || r.Obs.What != history.SeenDeadHolder || r.Obs.Now <= DeadHolderBound(r.Obs.Stopped, r.Obs.TTL) {
			continue
		}
		ob := history.WorkerObservation{Worker: r.Worker, Index: i, Observation: *r.Obs}
		k := fmt.Sprintf("%s\x00%s\x00%d", ob.Doc, ob.Holder, ob.Token)
		if seen[k] {
			continue
		}
		seen[k] = true
		var until string
		switch ahead := ob.Until - ob.Now; {
		case ahead > 24*3600*1000:
			until = "it live for more than a day yet (in effect, for ever)"
		case ahead > 0:
			until = fmt.Sprintf("it live until %d, %dms ahead", ob.Until, ahead)
		default:
			until = fmt.Sprintf("it expired at %d", ob.Until)
		}
		out = append(out, Violation{Invariant: I7, Document: ob.Doc, RootCause: true,
			Message: fmt.Sprintf("the lock provider did not hand over an expired lease: %s was refused at %d by %s's lease (token %d) on %s, %dms after that holder stopped at %d (its process ended, or it stalled at a paused failpoint); with a TTL of %dms that lease expired by %d at the latest, yet the provider reported %s",
				ob.Worker, ob.Now, ob.Holder, ob.Token, ob.Doc, ob.Now-ob.Stopped, ob.Stopped, ob.TTL, ob.Stopped+2*ob.TTL, until),
			Evidence: []string{fmt.Sprintf("history record %d: %s refused by %s (token %d) at %d", ob.Index, ob.Worker, ob.Holder, ob.Token, ob.Now)}})
	}
	return out
}
