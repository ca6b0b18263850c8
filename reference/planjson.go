package reference

import (
	"strconv"

	"github.com/crashmatrix/crashmatrix/internal/strictjson"
)

// The stored forms of a plan and a document state are written without
// reflection, exactly as json.Marshal renders them (the same fields in
// the same order, the same omissions, escapes and sorted map keys;
// TestPlanJSONIsJSONMarshal compares them on every field): a worker
// process writes a few plans and states and exits, and encoding/json's
// per-type set-up, which every fresh process pays again, was most of
// what writing them cost it.

// appendPlan appends p as json.Marshal renders it.
func appendPlan(b []byte, p *Plan) []byte {
	b = append(b, `{"kind":`...)
	b = strictjson.AppendString(b, string(p.Kind))
	b = append(b, `,"operationId":`...)
	b = strictjson.AppendString(b, p.OperationID)
	b = append(b, `,"space":`...)
	b = strictjson.AppendString(b, p.Space)
	b = append(b, `,"documentId":`...)
	b = strictjson.AppendString(b, p.DocumentID)
	b = append(b, `,"options":{"space":`...)
	b = strictjson.AppendString(b, p.Options.Space)
	if p.Options.ReadOnly {
		b = append(b, `,"readOnly":true`...)
	}
	if len(p.Options.Attributes) > 0 {
		b = strictjson.AppendStringMap(append(b, `,"attributes":`...), p.Options.Attributes)
	}
	b = AppendMutation(append(b, `},"mutation":`...), &p.Mutation)
	if p.PreviousState != nil {
		b = appendState(append(b, `,"previousState":`...), p.PreviousState)
	}
	if p.NextState != nil {
		b = appendState(append(b, `,"nextState":`...), p.NextState)
	}
	if len(p.StaleEdges) > 0 {
		b = appendEdgeKeys(append(b, `,"staleEdges":`...), p.StaleEdges)
	}
	if len(p.Registrations) > 0 {
		b = append(b, `,"registrations":[`...)
		for i := range p.Registrations {
			r := &p.Registrations[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"nodeId":`...)
			b = strictjson.AppendString(b, r.NodeID)
			b = append(b, `,"type":`...)
			b = strictjson.AppendString(b, r.Type)
			b = append(b, `,"canonicalName":`...)
			b = strictjson.AppendString(b, r.CanonicalName)
			if len(r.Aliases) > 0 {
				b = strictjson.AppendStrings(append(b, `,"aliases":`...), r.Aliases)
			}
			b = appendProps(b, r.Properties)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if p.Content != "" {
		b = strictjson.AppendString(append(b, `,"content":`...), p.Content)
	}
	if p.ExtractionCall != 0 {
		b = strconv.AppendInt(append(b, `,"extractionCall":`...), int64(p.ExtractionCall), 10)
	}
	return append(b, '}')
}

// appendState appends s as json.Marshal renders it.
func appendState(b []byte, s *DocumentState) []byte {
	b = append(b, `{"space":`...)
	b = strictjson.AppendString(b, s.Space)
	b = append(b, `,"documentId":`...)
	b = strictjson.AppendString(b, s.DocumentID)
	b = strconv.AppendInt(append(b, `,"revision":`...), s.Revision, 10)
	b = append(b, `,"operationId":`...)
	b = strictjson.AppendString(b, s.OperationID)
	b = append(b, `,"contentHash":`...)
	b = strictjson.AppendString(b, s.ContentHash)
	b = append(b, `,"extractionFingerprint":`...)
	b = strictjson.AppendString(b, s.ExtractionFingerprint)
	b = append(b, `,"status":`...)
	b = strictjson.AppendString(b, string(s.Status))
	b = append(b, `,"factSources":`...)
	if s.FactSources == nil {
		b = append(b, "null"...)
	} else {
		b = appendEdgeKeys(b, s.FactSources)
	}
	b = strictjson.AppendStrings(append(b, `,"nodeIds":`...), s.NodeIDs)
	b = strconv.AppendInt(append(b, `,"committedAt":`...), s.CommittedAt, 10)
	return append(b, '}')
}

// AppendMutation appends m as json.Marshal renders it (history writes a
// graph batch's mutation with it).
func AppendMutation(b []byte, m *Mutation) []byte {
	b = append(b, `{"operationId":`...)
	b = strictjson.AppendString(b, m.OperationID)
	if len(m.DeleteNodes) > 0 {
		b = strictjson.AppendStrings(append(b, `,"deleteNodes":`...), m.DeleteNodes)
	}
	if len(m.DeleteEdges) > 0 {
		b = appendEdgeKeys(append(b, `,"deleteEdges":`...), m.DeleteEdges)
	}
	if len(m.UpsertNodes) > 0 {
		b = append(b, `,"upsertNodes":[`...)
		for i := range m.UpsertNodes {
			n := &m.UpsertNodes[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = strictjson.AppendString(b, n.ID)
			b = append(b, `,"label":`...)
			b = strictjson.AppendString(b, n.Label)
			b = append(appendProps(b, n.Properties), '}')
		}
		b = append(b, ']')
	}
	if len(m.UpsertEdges) > 0 {
		b = append(b, `,"upsertEdges":[`...)
		for i := range m.UpsertEdges {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendEdgeKey(append(b, `{"key":`...), m.UpsertEdges[i].Key)
			b = append(appendProps(b, m.UpsertEdges[i].Properties), '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendProps appends an omitempty "properties" field.
func appendProps(b []byte, props map[string]string) []byte {
	if len(props) == 0 {
		return b
	}
	return strictjson.AppendStringMap(append(b, `,"properties":`...), props)
}

func appendEdgeKeys(b []byte, ks []EdgeKey) []byte {
	return strictjson.AppendArray(b, ks, appendEdgeKey)
}

func appendEdgeKey(b []byte, k EdgeKey) []byte {
	b = append(b, `{"source":`...)
	b = strictjson.AppendString(b, k.Source)
	b = append(b, `,"type":`...)
	b = strictjson.AppendString(b, k.Type)
	b = append(b, `,"target":`...)
	b = strictjson.AppendString(b, k.Target)
	b = strconv.AppendInt(append(b, `,"rank":`...), k.Rank, 10)
	return append(b, '}')
}
