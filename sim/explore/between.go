package explore

import (
	"math/rand"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// Competitors between store calls: wherever a schedule breaks a lease, a
// holder of it is parked before a random one of its store calls
// (faults.StoreCall), not only at the named windows, so that the other
// holder can run between any two of its calls. A split lease is taken
// from a holder that runs before the worker granted it; an early-expiring
// lease is its own worker's, and a later worker takes it. The holder
// stalls a quarter of the TTL, so it still believes its lease when it
// wakes.

// maxCallsPerAction bounds the store call a stall is drawn before: an
// ingestion makes about twenty, more when it conflicts.
const maxCallsPerAction = 24

// stallBetweenCalls arms the store-call stall of a schedule with a lease
// fault. Its draws come after every other draw of the schedule, so that a
// schedule without a lease fault is what it always was.
func stallBetweenCalls(r *rand.Rand, c *catalogue.Case, clients int, shape Shape) {
	for j := 0; j < clients; j++ {
		a, ok := c.Steps[j].Arms[faults.LeaseAcquire]
		if !ok || !a.Kind.IsLeaseFault() {
			continue
		}
		holder := -1
		switch {
		case a.Kind == faults.Split && j > 0:
			holder = r.Intn(j) // a worker before the one granted the live lease
		case a.Kind == faults.Expire && j+1 < clients:
			holder = j // the worker whose lease the store forgets
		}
		if holder < 0 {
			continue
		}
		st := &c.Steps[holder]
		if _, armed := st.Arms[faults.StoreCall]; armed || st.Background || st.Kill != nil {
			continue // already parked elsewhere, or killed at an instant
		}
		if st.Arms == nil {
			st.Arms = faults.Arms{}
		}
		call := 1 + r.Intn(maxCallsPerAction*len(st.Actions))
		st.Arms[faults.StoreCall] = faults.PauseOn(catalogue.Lease(time.Duration(shape.LeaseTTLMillis)*time.Millisecond).StaleStall(), call)
		st.Background = true
	}
}
