package bench

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash"
	"slices"
	"strconv"
	"time"
)

// The host probe: a fixed piece of CPU-bound work, made of the standard
// library only and the same on every commit, that bench times before and
// after its figures. On a shared machine the CPU a process gets for the
// same work moves by more than two times from one hour to the next (on
// this project's 2-core host, a simulated-store exploration took 0.36 ms
// of CPU a schedule one morning and 0.94 ms that afternoon, on the same
// commit): the probe says which kind of sitting a section of
// docs/performance.md was measured in, so that figures from two sittings
// are compared through it, not as they stand.
//
// Its mix follows what the harness spends its CPU on: sorting, string
// keys in maps, SHA-256, JSON and many small allocations.

// probeSum is the checksum of the probe's work. The probe's times are
// comparable across commits only while the work is the same: a change to
// hostProbeWork changes the sum, TestHostProbeWorkIsFixed fails, and the
// sittings measured before the change can no longer be compared by it.
const probeSum = "0d0537cacc28e83b"

// hostProbeWork does the probe's work once and returns a checksum of its
// results.
func hostProbeWork() string {
	x := uint64(88172645463325252) // xorshift64: the same numbers everywhere
	next := func() uint64 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return x
	}
	h := sha256.New()
	var b8 [8]byte
	sum := func(v uint64) { binary.LittleEndian.PutUint64(b8[:], v); h.Write(b8[:]) }
	probeSort(next, sum)
	probeMap(next, sum)
	probeHash(next, h)
	probeJSON(next, h, sum)
	return fmt.Sprintf("%x", h.Sum(nil)[:8])
}

// probeSort is the probe's sorting.
func probeSort(next func() uint64, sum func(uint64)) {
	nums := make([]uint64, 200_000)
	for i := range nums {
		nums[i] = next()
	}
	slices.Sort(nums)
	sum(nums[0] ^ nums[len(nums)/2] ^ nums[len(nums)-1])
}

// probeMap is the probe's string keys in a map, as the checks' indexes
// keep them.
func probeMap(next func() uint64, sum func(uint64)) {
	m := make(map[string]int)
	for i := 0; i < 100_000; i++ {
		m["doc-"+strconv.FormatUint(next()%50_000, 36)] += i
	}
	hits := 0
	for i := 0; i < 100_000; i++ {
		if v, ok := m["doc-"+strconv.FormatUint(uint64(i), 36)]; ok {
			hits += v & 0xff
		}
	}
	sum(uint64(len(m)))
	sum(uint64(hits))
}

// probeHash is the probe's SHA-256 over 4 MiB, as fingerprints hash
// plans.
func probeHash(next func() uint64, h hash.Hash) {
	buf := make([]byte, 4<<20)
	for i := 0; i+8 <= len(buf); i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], next())
	}
	d := sha256.Sum256(buf)
	h.Write(d[:])
}

// probeJSON is the probe's JSON both ways, as plans and histories are
// written and read.
func probeJSON(next func() uint64, h hash.Hash, sum func(uint64)) {
	type rec struct {
		Op    string            `json:"op"`
		Rev   int64             `json:"rev"`
		Props map[string]string `json:"props"`
		Edges []string          `json:"edges"`
	}
	recs := make([]rec, 3_000)
	for i := range recs {
		recs[i] = rec{
			Op:    "ingest-" + strconv.FormatUint(next(), 16),
			Rev:   int64(next() % 1000),
			Props: map[string]string{"role": strconv.Itoa(i), "team": "graph"},
			Edges: []string{"KNOWS", strconv.FormatUint(next()%97, 10)},
		}
	}
	js, err := json.Marshal(recs)
	if err != nil {
		panic(err) // cannot happen: the types marshal
	}
	var back []rec
	if err := json.Unmarshal(js, &back); err != nil {
		panic(err)
	}
	h.Write(js)
	sum(uint64(len(back)))
}

// hostProbe times the probe's work: one run to warm up, then runs
// times; it returns the median and the fastest. The work runs on one
// goroutine, so on an idle core its wall time is its CPU time.
func hostProbe(runs int) (median, fastest time.Duration) {
	hostProbeWork()
	took := make([]time.Duration, runs)
	for i := range took {
		start := time.Now()
		hostProbeWork()
		took[i] = time.Since(start)
	}
	slices.Sort(took)
	return took[len(took)/2], took[0]
}

// hostProbeLine is bench's line for a probe taken when (start, end).
func hostProbeLine(when string) string {
	med, min := hostProbe(5)
	return fmt.Sprintf("host speed at the %s: the fixed probe (sorting, string maps, SHA-256, JSON; the same work on every commit) took median %s, fastest %s over 5 runs: figures of two sittings compare through it",
		when, med.Round(100*time.Microsecond), min.Round(100*time.Microsecond))
}
