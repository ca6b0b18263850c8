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

// readPlan reads b, a plan as appendPlan writes it, into p without
// reflection. It reports false for anything it is not sure
// encoding/json would read the same way (white space, null, an unknown,
// repeated or differently cased key, a value of another type, anything
// after the plan), and decodePlan then leaves b to encoding/json, whose
// reading and errors stay the stored plan's definition
// (TestReadPlanIsJSONUnmarshal).
func readPlan(b []byte, p *Plan) bool {
	d := &strictjson.Decoder{B: b}
	var out Plan
	ok := d.Object(planKeys, func(key string) bool {
		switch key {
		case "kind":
			return d.Str((*string)(&out.Kind))
		case "operationId":
			return d.Str(&out.OperationID)
		case "space":
			return d.Str(&out.Space)
		case "documentId":
			return d.Str(&out.DocumentID)
		case "options":
			return d.Object(optionKeys, func(key string) bool {
				switch key {
				case "space":
					return d.Str(&out.Options.Space)
				case "readOnly":
					return d.Bool(&out.Options.ReadOnly)
				}
				return d.StringMap(&out.Options.Attributes)
			})
		case "mutation":
			return ReadMutation(d, &out.Mutation)
		case "previousState":
			out.PreviousState = &DocumentState{}
			return readState(d, out.PreviousState)
		case "nextState":
			out.NextState = &DocumentState{}
			return readState(d, out.NextState)
		case "staleEdges":
			return readEdgeKeys(d, &out.StaleEdges)
		case "registrations":
			out.Registrations = []EntityRegistration{}
			return d.Array(func() bool {
				var r EntityRegistration
				ok := d.Object(registrationKeys, func(key string) bool {
					switch key {
					case "nodeId":
						return d.Str(&r.NodeID)
					case "type":
						return d.Str(&r.Type)
					case "canonicalName":
						return d.Str(&r.CanonicalName)
					case "aliases":
						return d.Strings(&r.Aliases)
					}
					return d.StringMap(&r.Properties)
				})
				out.Registrations = append(out.Registrations, r)
				return ok
			})
		case "content":
			return d.Str(&out.Content)
		}
		return d.Int(&out.ExtractionCall)
	})
	if !ok || d.I != len(b) {
		return false
	}
	*p = out
	return true
}

// readStateBytes reads b, a document state as appendState writes it, as
// readPlan reads a plan.
func readStateBytes(b []byte, s *DocumentState) bool {
	d := &strictjson.Decoder{B: b}
	var out DocumentState
	if !readState(d, &out) || d.I != len(b) {
		return false
	}
	*s = out
	return true
}

var (
	planKeys = strictjson.KeyBits("kind", "operationId", "space", "documentId", "options", "mutation", "previousState", "nextState",
		"staleEdges", "registrations", "content", "extractionCall")
	optionKeys       = strictjson.KeyBits("space", "readOnly", "attributes")
	registrationKeys = strictjson.KeyBits("nodeId", "type", "canonicalName", "aliases", "properties")
	stateKeys        = strictjson.KeyBits("space", "documentId", "revision", "operationId", "contentHash", "extractionFingerprint", "status",
		"factSources", "nodeIds", "committedAt")
	mutationKeys = strictjson.KeyBits("operationId", "deleteNodes", "deleteEdges", "upsertNodes", "upsertEdges")
	nodeKeys     = strictjson.KeyBits("id", "label", "properties")
	edgeKeys     = strictjson.KeyBits("key", "properties")
	edgeKeyKeys  = strictjson.KeyBits("source", "type", "target", "rank")
)

func readState(d *strictjson.Decoder, s *DocumentState) bool {
	return d.Object(stateKeys, func(key string) bool {
		switch key {
		case "space":
			return d.Str(&s.Space)
		case "documentId":
			return d.Str(&s.DocumentID)
		case "revision":
			return d.Int64(&s.Revision)
		case "operationId":
			return d.Str(&s.OperationID)
		case "contentHash":
			return d.Str(&s.ContentHash)
		case "extractionFingerprint":
			return d.Str(&s.ExtractionFingerprint)
		case "status":
			return d.Str((*string)(&s.Status))
		case "factSources":
			return d.Null() || readEdgeKeys(d, &s.FactSources) // null: a nil slice, as written
		case "nodeIds":
			return d.Null() || d.Strings(&s.NodeIDs)
		}
		return d.Int64(&s.CommittedAt)
	})
}

// ReadMutation reads a mutation as AppendMutation writes it (history
// reads a graph batch with it), reporting false as readPlan does.
func ReadMutation(d *strictjson.Decoder, m *Mutation) bool {
	return d.Object(mutationKeys, func(key string) bool {
		switch key {
		case "operationId":
			return d.Str(&m.OperationID)
		case "deleteNodes":
			return d.Strings(&m.DeleteNodes)
		case "deleteEdges":
			return readEdgeKeys(d, &m.DeleteEdges)
		case "upsertNodes":
			m.UpsertNodes = []NodeUpsert{}
			return d.Array(func() bool {
				var n NodeUpsert
				ok := d.Object(nodeKeys, func(key string) bool {
					switch key {
					case "id":
						return d.Str(&n.ID)
					case "label":
						return d.Str(&n.Label)
					}
					return d.StringMap(&n.Properties)
				})
				m.UpsertNodes = append(m.UpsertNodes, n)
				return ok
			})
		}
		m.UpsertEdges = []EdgeUpsert{}
		return d.Array(func() bool {
			var e EdgeUpsert
			ok := d.Object(edgeKeys, func(key string) bool {
				if key == "key" {
					return readEdgeKey(d, &e.Key)
				}
				return d.StringMap(&e.Properties)
			})
			m.UpsertEdges = append(m.UpsertEdges, e)
			return ok
		})
	})
}

func readEdgeKeys(d *strictjson.Decoder, p *[]EdgeKey) bool {
	out := []EdgeKey{}
	ok := d.Array(func() bool {
		var k EdgeKey
		ok := readEdgeKey(d, &k)
		out = append(out, k)
		return ok
	})
	*p = out
	return ok
}

func readEdgeKey(d *strictjson.Decoder, k *EdgeKey) bool {
	return d.Object(edgeKeyKeys, func(key string) bool {
		switch key {
		case "source":
			return d.Str(&k.Source)
		case "type":
			return d.Str(&k.Type)
		case "target":
			return d.Str(&k.Target)
		}
		return d.Int64(&k.Rank)
	})
}
