package catalogue

import (
	"fmt"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
)

// BetweenCallsClass prefixes the class of every between-calls case; each
// case is a class row of its own ("between-calls-split-07").
const BetweenCallsClass = "between-calls"

// IsBetweenCalls reports whether c is a between-calls case.
func IsBetweenCalls(c Case) bool { return strings.HasPrefix(c.Class, BetweenCallsClass+"-") }

// StaleCallKinds are the lease faults the between-calls cases sweep.
var StaleCallKinds = []faults.Kind{faults.Split, faults.Expire}

// staleHolderStep returns the lease-fault case of kind k and the index of
// its stale holder's step (the one parked while the competitor commits).
func (b Builder) staleHolderStep(k faults.Kind) (Case, int) {
	spec, _ := faults.Lookup(faults.LeaseAcquire)
	c, _ := b.windowCase(spec, k)
	return c, 0 // leaseFaultCase puts the stale holder first
}

// StaleCallProbe is the stale holder of kind k's case alone, with every
// store call marked (a zero pause at every hit), so that its history counts
// them.
func (b Builder) StaleCallProbe(k faults.Kind) Case {
	c, i := b.staleHolderStep(k)
	st := c.Steps[i]
	st.Arms = faults.Arms{faults.StoreCall: faults.PauseOn(0, 0)}
	if k == faults.Expire {
		st.Arms[faults.LeaseAcquire] = faults.On(k, 1)
	}
	st.Background, st.Meanwhile, st.ExpectHit = false, nil, nil
	return Case{ID: "probe-stale-calls-" + string(k), System: faults.Ingestion, Class: "probe", TTLMillis: b.ttl,
		Description: fmt.Sprintf("the stale holder of the %s lease case alone, every store call marked: counts the calls the between-calls cases stall before", k),
		Steps:       []Step{st, QuiesceStep(faults.Ingestion, st.Worker)}}
}

// BetweenCallsCase is the lease-fault case of kind k with the stale holder
// parked before its call-th store call instead of at its named window.
func (b Builder) BetweenCallsCase(k faults.Kind, call, calls int) Case {
	c, i := b.staleHolderStep(k)
	st := &c.Steps[i]
	delete(st.Arms, faults.BeforeStateCommit)
	st.Arms[faults.StoreCall] = faults.PauseOn(b.StaleStall(), call)
	st.ExpectHit = append(slicesWithout(st.ExpectHit, faults.BeforeStateCommit), faults.StoreCall)
	name := fmt.Sprintf("%s-%s-%02d", BetweenCallsClass, k, call)
	c.ID, c.Class, c.Point, c.Kind = name, name, "", k
	of := ""
	if calls > 0 {
		of = fmt.Sprintf(" of %d", calls)
	}
	c.Description = fmt.Sprintf("%s lease: the stale holder (%s) stalls before its store call %d%s while %s, granted the broken lease, commits another version of the document; its remaining calls must be stopped by the revision CAS, the claim and the plan fingerprint, not by the lease",
		k, st.Worker, call, of, st.Meanwhile.Worker)
	return c
}

func slicesWithout(ps []faults.Point, p faults.Point) []faults.Point {
	var out []faults.Point
	for _, x := range ps {
		if x != p {
			out = append(out, x)
		}
	}
	return out
}

// BetweenCallsCases sweeps the stale holder's store calls for each lease
// fault kind (calls: what the probe counted).
// A case's call count ("of N") is in its description only: a scenario
// that pins one call (calls 0) stands without it.
func (b Builder) BetweenCallsCases(calls map[faults.Kind]int) []Case {
	var out []Case
	for _, k := range StaleCallKinds {
		for n := 1; n <= calls[k]; n++ {
			out = append(out, b.BetweenCallsCase(k, n, calls[k]))
		}
	}
	return out
}

// StaleStall is how long the stale holder of a lease-fault case stalls: a
// quarter of the TTL, so that it still believes its lease when it wakes.
func (b Builder) StaleStall() time.Duration {
	return time.Duration(b.ttl/4) * time.Millisecond
}

// betweenCalls narrows the between-calls cases as Filter narrows the
// other classes, except that a class names its family too: "between-calls"
// selects every one, "between-calls-split" those of one lease fault.
func (s Selection) betweenCalls(cases []Case) []Case {
	if len(s.Classes) == 0 {
		if len(s.Points) > 0 || len(s.Kinds) > 0 {
			return nil
		}
		return cases
	}
	var out []Case
	for _, c := range cases {
		for _, want := range s.Classes {
			if c.Class == want || strings.HasPrefix(c.Class, want+"-") && strings.HasPrefix(want, BetweenCallsClass) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}
