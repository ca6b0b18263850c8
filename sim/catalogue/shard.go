package catalogue

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults"
)

// Shard is one part of a matrix split over several machines (certify
// --shard i/n): Index of Count, counted from 0 like explore's --shard.
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// ParseShard reads "i/n" with 0 <= i < n.
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, e1 := strconv.Atoi(strings.TrimSpace(a))
	n, e2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || e1 != nil || e2 != nil || n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("--shard %q: want i/n with 0 <= i < n", s)
	}
	return Shard{Index: i, Count: n}, nil
}

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// ShardOf says which of n shards each case belongs to: the cases are
// ordered by their ID (a stable key, unique in a matrix: neither their
// position in the matrix nor any map order counts) and dealt out in turn,
// so the shards are disjoint, their union is the whole matrix, and they
// differ in size by one case at most.
func ShardOf(ids []string, n int) map[string]int {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	out := make(map[string]int, len(sorted))
	for i, id := range sorted {
		out[id] = i % n
	}
	return out
}

// Select returns the shard's cases, in matrix order.
func (s Shard) Select(cases []Case) []Case {
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = c.ID
	}
	of := ShardOf(ids, s.Count)
	var out []Case
	for _, c := range cases {
		if of[c.ID] == s.Index {
			out = append(out, c)
		}
	}
	return out
}

// MatrixCase is where a case sits in the matrix: what a merge needs to
// place a result, or the lack of one, without the case's steps.
type MatrixCase struct {
	ID     string        `json:"id"`
	System faults.System `json:"system"`
	Point  faults.Point  `json:"point,omitempty"`
	Kind   faults.Kind   `json:"kind,omitempty"`
	Server string        `json:"server,omitempty"`
	Class  string        `json:"class,omitempty"`
	Store  bool          `json:"store,omitempty"`
}

// Case is the matrix case as a Case without steps.
func (m MatrixCase) Case() Case {
	return Case{ID: m.ID, System: m.System, Point: m.Point, Kind: m.Kind, Server: m.Server, Class: m.Class, Store: m.Store}
}

// MatrixID is the whole matrix a certify run belongs to, even when it ran
// only a shard of it: the settings that decide which cases there are and
// what they run, and the cases. Shards of one matrix carry the same
// Fingerprint; a merge refuses the others.
type MatrixID struct {
	// Fingerprint is a hash of everything below (MatrixID.Sum).
	Fingerprint string   `json:"fingerprint"`
	Backend     string   `json:"backend"`
	Mutant      string   `json:"mutant,omitempty"`
	Bugs        []string `json:"bugs,omitempty"`
	Seed        int64    `json:"seed"`
	// Mode is "processes", "in-process" or "in-process-files".
	Mode string `json:"mode"`
	// The selection certify was given (empty: the whole matrix).
	Points      []string `json:"points,omitempty"`
	Kinds       []string `json:"kinds,omitempty"`
	Classes     []string `json:"classes,omitempty"`
	RandomKills int      `json:"randomKills,omitempty"`
	// Cases are every case of the matrix, in matrix order.
	Cases []MatrixCase `json:"cases"`
}

// NewMatrixID identifies a matrix: its settings and all its cases (before
// any shard is taken), with its fingerprint.
func NewMatrixID(id MatrixID, cases []Case) MatrixID {
	id.Cases = make([]MatrixCase, len(cases))
	for i, c := range cases {
		id.Cases[i] = MatrixCase{ID: c.ID, System: c.System, Point: c.Point, Kind: c.Kind, Server: c.Server, Class: c.Class, Store: c.Store}
	}
	id.Fingerprint = id.Sum()
	return id
}

// Sum is the fingerprint of the matrix: a hash of its settings and cases
// (not of the fingerprint field itself).
func (id MatrixID) Sum() string {
	id.Fingerprint = ""
	b, err := json.Marshal(id)
	if err != nil {
		panic(err) // strings, numbers and slices of them always marshal
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// IDs are the matrix's case IDs, in matrix order.
func (id MatrixID) IDs() []string {
	out := make([]string, len(id.Cases))
	for i, c := range id.Cases {
		out[i] = c.ID
	}
	return out
}

// ShardRun says which shard of its matrix a report covers.
type ShardRun struct {
	Shard
	// Cases is how many of the matrix's cases are the shard's.
	Cases int `json:"cases"`
	// Rerun is the certify command of the whole matrix (without
	// --shard), Replay the same without a selection, to which a merge adds
	// one case's window and kind (or class).
	Rerun  string `json:"rerun,omitempty"`
	Replay string `json:"replay,omitempty"`
}
