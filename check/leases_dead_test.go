package check_test

import (
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/history"
)

// A refusal by the lease of a holder that stopped is I7 only past
// DeadHolderBound: before it, a renew just before the stop (or a split
// grant) can still keep the lease live. One violation per lease, however
// many refusals, marked as the root cause of the case's other findings.
func TestI7DeadHolderLease(t *testing.T) {
	const stopped, ttl = 10_000, 250
	refused := func(worker string, now int64) history.Record {
		return history.Record{Worker: worker, Kind: history.Seen, Obs: &history.Observation{What: history.SeenDeadHolder,
			Doc: "d4", Holder: "fault/42#1", Token: 3, Until: 1 << 50, Now: now, Stopped: stopped, TTL: ttl}}
	}
	bound := check.DeadHolderBound(stopped, ttl)
	if bound < stopped+2*ttl {
		t.Fatalf("bound %d is within two TTLs of the stop %d", bound, stopped)
	}
	if v := check.CheckI7(check.Snapshot{}, check.Observed{Log: history.Log{refused("recover", bound)}}); len(v) != 0 {
		t.Fatalf("a refusal at the bound: %v, want none", v)
	}
	v := check.CheckI7(check.Snapshot{}, check.Observed{Log: history.Log{refused("recover", bound+1), refused("quiesce", bound+40)}})
	if len(v) != 1 {
		t.Fatalf("two refusals past the bound by one lease: %v, want one violation", v)
	}
	if v[0].Invariant != check.I7 || !v[0].RootCause || v[0].Document != "d4" {
		t.Errorf("violation %+v: want I7, root cause, document d4", v[0])
	}
	for _, want := range []string{"the lock provider did not hand over an expired lease", "fault/42#1", "token 3", "for ever"} {
		if !strings.Contains(v[0].Message, want) {
			t.Errorf("message %q does not say %q", v[0].Message, want)
		}
	}
}
