package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/crashmatrix/crashmatrix/reference"
)

type nameKey struct{ space, typ, name string }

type entityKey struct{ space, node string }

type entity struct {
	typ, canonical string
	names          map[string]bool
	props          map[string]string
}

// Registry is an in-memory reference.EntityRegistry.
type Registry struct {
	mu       sync.Mutex
	names    map[nameKey]string
	entities map[entityKey]*entity
}

// NewRegistry returns an empty entity registry.
func NewRegistry() *Registry {
	return &Registry{names: map[nameKey]string{}, entities: map[entityKey]*entity{}}
}

// FindMatches implements reference.EntityRegistry. The result is ordered by
// NodeID.
func (g *Registry) FindMatches(ctx context.Context, space, entityType string, names []string) ([]reference.RegisteredEntity, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if err := reference.CheckSpace(space); err != nil {
		return nil, err
	}
	typ := reference.Normalize(entityType)
	g.mu.Lock()
	defer g.mu.Unlock()
	nodes := map[string]bool{}
	for _, n := range names {
		nn := reference.Normalize(n)
		if nn == "" {
			continue
		}
		if id, ok := g.names[nameKey{space, typ, nn}]; ok {
			nodes[id] = true
		}
	}
	out := make([]reference.RegisteredEntity, 0, len(nodes))
	for _, id := range slices.Sorted(maps.Keys(nodes)) {
		out = append(out, g.view(space, id))
	}
	return out, nil
}

func (g *Registry) view(space, id string) reference.RegisteredEntity {
	e := g.entities[entityKey{space, id}]
	re := reference.RegisteredEntity{Space: space, NodeID: id}
	if e == nil {
		return re
	}
	re.Type, re.CanonicalName = e.typ, e.canonical
	re.Names = slices.Sorted(maps.Keys(e.names))
	if len(e.props) > 0 {
		re.Properties = maps.Clone(e.props)
	}
	return re
}

// SaveAll implements reference.EntityRegistry.
func (g *Registry) SaveAll(ctx context.Context, space string, regs []reference.EntityRegistration) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if err := reference.CheckSpace(space); err != nil {
		return err
	}
	for _, r := range regs {
		if err := reference.CheckRegistration(space, r); err != nil {
			return err
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// Check everything first: all or nothing.
	batch := map[nameKey]string{}
	for _, r := range regs {
		typ := reference.Normalize(r.Type)
		for _, n := range r.NormalizedNames() {
			k := nameKey{space, typ, n}
			if id, ok := g.names[k]; ok && id != r.NodeID {
				return fmt.Errorf("name %q (type %s) is bound to %s, not %s: %w", n, typ, id, r.NodeID, reference.ErrRegistryConflict)
			}
			if id, ok := batch[k]; ok && id != r.NodeID {
				return fmt.Errorf("name %q (type %s) is bound to %s and %s in one batch: %w", n, typ, id, r.NodeID, reference.ErrRegistryConflict)
			}
			batch[k] = r.NodeID
		}
	}
	for _, r := range regs {
		typ := reference.Normalize(r.Type)
		ek := entityKey{space, r.NodeID}
		e := g.entities[ek]
		if e == nil {
			e = &entity{typ: strings.TrimSpace(r.Type), canonical: strings.TrimSpace(r.CanonicalName), names: map[string]bool{}, props: map[string]string{}}
			g.entities[ek] = e
		}
		for _, n := range r.NormalizedNames() {
			g.names[nameKey{space, typ, n}] = r.NodeID
			e.names[n] = true
		}
		maps.Copy(e.props, r.Properties)
	}
	return nil
}

// List implements reference.EntityRegistry.
func (g *Registry) List(ctx context.Context, space string) ([]reference.RegisteredEntity, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var ids []string
	for k := range g.entities {
		if k.space == space {
			ids = append(ids, k.node)
		}
	}
	sort.Strings(ids)
	out := make([]reference.RegisteredEntity, 0, len(ids))
	for _, id := range ids {
		out = append(out, g.view(space, id))
	}
	return out, nil
}
