package reference

import "maps"

// Clone returns a deep copy of the plan: no map, slice or pointer of the
// copy is shared with p.
func (p Plan) Clone() Plan {
	c := p
	c.Options.Attributes = maps.Clone(p.Options.Attributes)
	c.Mutation = p.Mutation.Clone()
	c.PreviousState = p.PreviousState.clonePtr()
	c.NextState = p.NextState.clonePtr()
	c.StaleEdges = cloneSlice(p.StaleEdges)
	c.Registrations = cloneEach(p.Registrations, func(r EntityRegistration) EntityRegistration {
		r.Aliases = cloneSlice(r.Aliases)
		r.Properties = maps.Clone(r.Properties)
		return r
	})
	return c
}

// Clone returns a deep copy of the mutation.
func (m Mutation) Clone() Mutation {
	c := m
	c.DeleteNodes = cloneSlice(m.DeleteNodes)
	c.DeleteEdges = cloneSlice(m.DeleteEdges)
	c.UpsertNodes = cloneEach(m.UpsertNodes, func(n NodeUpsert) NodeUpsert { n.Properties = maps.Clone(n.Properties); return n })
	c.UpsertEdges = cloneEach(m.UpsertEdges, func(e EdgeUpsert) EdgeUpsert { e.Properties = maps.Clone(e.Properties); return e })
	return c
}

// Clone returns a deep copy of the state.
func (s DocumentState) Clone() DocumentState {
	c := s
	c.FactSources = cloneSlice(s.FactSources)
	c.NodeIDs = cloneSlice(s.NodeIDs)
	return c
}

func (s *DocumentState) clonePtr() *DocumentState {
	if s == nil {
		return nil
	}
	c := s.Clone()
	return &c
}

func cloneSlice[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

// cloneEach copies s with f applied to each element (nil stays nil).
func cloneEach[T any](s []T, f func(T) T) []T {
	if s == nil {
		return nil
	}
	c := make([]T, len(s))
	for i, x := range s {
		c[i] = f(x)
	}
	return c
}
