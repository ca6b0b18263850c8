package sqlcore

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/crashmatrix/crashmatrix/reference"
)

// NameKey is one name a registry binds: its normalised type and name.
type NameKey struct{ Type, Name string }

// BindNames validates a reference.EntityRegistry.SaveAll batch and returns
// the node id each of its names is to be bound to, with the names in
// (type, name) order: the order the adapters write them in, so that two
// batches lock names in one order. A name bound to two node ids within the
// batch is an error wrapping ErrRegistryConflict.
func BindNames(space string, regs []reference.EntityRegistration) ([]NameKey, map[NameKey]string, error) {
	if err := reference.CheckSpace(space); err != nil {
		return nil, nil, err
	}
	batch := map[NameKey]string{}
	for _, r := range regs {
		if err := reference.CheckRegistration(space, r); err != nil {
			return nil, nil, err
		}
		typ := reference.Normalize(r.Type)
		for _, n := range r.NormalizedNames() {
			k := NameKey{typ, n}
			if id, ok := batch[k]; ok && id != r.NodeID {
				return nil, nil, fmt.Errorf("name %q (type %s) is bound to %s and %s in one batch: %w", n, typ, id, r.NodeID, reference.ErrRegistryConflict)
			}
			batch[k] = r.NodeID
		}
	}
	keys := slices.SortedFunc(maps.Keys(batch), func(a, b NameKey) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Name, b.Name))
	})
	return keys, batch, nil
}

// BoundElsewhere is the error of a registry batch one of whose names is
// bound to another node id already: it wraps ErrRegistryConflict.
func BoundElsewhere(space string, k NameKey, current, want string) error {
	return fmt.Errorf("space %s: name %q (type %s) is bound to %s, not %s: %w", space, k.Name, k.Type, current, want, reference.ErrRegistryConflict)
}

// MatchKey is one name a reference.BatchMatcher looks up: the index of its
// query, the normalised type and name.
type MatchKey struct {
	Query      int
	Type, Name string
}

// MatchKeys lists the distinct non-blank normalised names of each query,
// and returns with them the answer to fill in: one empty list per query.
func MatchKeys(queries []reference.EntityQuery) ([]MatchKey, [][]string) {
	var keys []MatchKey
	for i, q := range queries {
		typ := reference.Normalize(q.Type)
		for _, n := range reference.NormalizeNames(q.Names) {
			keys = append(keys, MatchKey{i, typ, n})
		}
	}
	out := make([][]string, len(queries))
	for i := range out {
		out[i] = []string{}
	}
	return keys, out
}
