package catalogue

import "time"

// Builder builds the catalogue's cases for one lease TTL, the value every
// pause a case arms is defined against (a stall past the lease, half of
// it, a boundary around its expiry): the matrix (Matrix, WindowCase), the
// case classes (ClassCases, BoundaryCases, SecondCases), the power-loss,
// store-window, server and between-calls cases are its methods, and no
// case function takes the TTL as a number of its own. Each case records
// the TTL it was built for (Case.TTLMillis), so that a runner whose timing
// rose since rescales it (Case.ForTTL).
type Builder struct {
	ttl int64 // the lease TTL in milliseconds, the unit of the pauses
}

// Lease returns the builder of the cases for a lease TTL.
func Lease(ttl time.Duration) Builder { return Builder{ttl: ttl.Milliseconds()} }
