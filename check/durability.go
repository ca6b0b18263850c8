package check

import (
	"fmt"
	"time"

	"github.com/crashmatrix/crashmatrix/reference"
)

// Restart is one database server restart of a case: the server was killed
// (SIGKILL) at a window and started again on the same data, and the stores
// were read before any worker wrote again.
type Restart struct {
	// Server is "postgres" or "neo4j"; Point the window, Worker the
	// worker that reached it.
	Server string `json:"server"`
	Point  string `json:"point"`
	Worker string `json:"worker"`
	// Took is the time from the kill to the first answered query.
	Took time.Duration `json:"took"`
	// Events is how many service events the history held at the kill:
	// every write they acknowledge was acknowledged before it.
	Events int `json:"events"`
	// SavedPlans are the System B plan row ids a save had returned before
	// the kill.
	SavedPlans []int64 `json:"savedPlans,omitempty"`
	// Snapshot is what the stores held right after the restart;
	// SnapshotErr says why it could not be read.
	Snapshot    Snapshot `json:"-"`
	SnapshotErr string   `json:"snapshotErr,omitempty"`
}

// Label names the restart in evidence.
func (r Restart) Label(i int) string {
	return fmt.Sprintf("%s restart #%d (SIGKILL at %s, reached by worker %s; back after %s)", r.Server, i+1, r.Point, r.Worker, r.Took.Round(time.Millisecond))
}

// CheckI9: acknowledged durability. Every write whose success the history
// recorded (operation created, stage advanced, state committed, version
// recorded, graph batch applied, plan saved) is in the stores right after
// each server restart that followed it, and, but for the graph (whose
// edges a later plan may delete), in the final state after every crash
// (there, the writes of an operation that is gone altogether are I5's).
func CheckI9(s Snapshot, o Observed) []Violation {
	var out []Violation
	for i, r := range o.Restarts {
		label := r.Label(i)
		if r.SnapshotErr != "" {
			out = append(out, Violation{Invariant: I9, Message: "the stores could not be read right after " + label, Evidence: []string{r.SnapshotErr}})
			continue
		}
		out = append(out, lostWrites(r.Snapshot, o.Events[:min(r.Events, len(o.Events))], r.SavedPlans, "right after "+label, true)...)
	}
	var saved []int64
	for _, t := range o.Threads {
		saved = append(saved, t.ReturnedIDs...)
	}
	return append(out, lostWrites(s, o.Events, saved, "after the final recovery", false)...)
}

// lostWrites lists the acknowledged writes of events (and saved plan rows)
// that s does not hold; graph says whether graph batches are checked too.
func lostWrites(s Snapshot, events []reference.Event, saved []int64, when string, graph bool) []Violation {
	var out []Violation
	lost := func(e reference.Event, forgot, what string, evidence ...string) {
		out = append(out, Violation{Invariant: I9, Operation: e.OperationID, Document: e.DocumentID, Forgot: forgot,
			Message:  fmt.Sprintf("an acknowledged write is missing %s: %s", when, what),
			Evidence: append([]string{fmt.Sprintf("acknowledged: %s event by %s at %d", e.Kind, e.Holder, e.At)}, evidence...)})
	}
	ops := opIndex(s)
	cur := map[string]reference.DocumentState{}
	for _, st := range s.States {
		cur[st.DocumentID] = st
	}
	// The last acknowledged graph write of each edge and node: an upsert
	// must be there, a delete may have removed it.
	type graphWrite struct {
		e      reference.Event
		upsert bool
	}
	edges := map[reference.EdgeKey]graphWrite{}
	nodes := map[string]graphWrite{}
	var edgeOrder []reference.EdgeKey
	var nodeOrder []string
	for _, e := range events {
		if _, ok := ops[e.OperationID]; !ok && !graph && e.OperationID != "" {
			continue // in the final state, I5 reports an operation lost with all its writes
		}
		switch e.Kind {
		case reference.EvPrepared:
			if _, ok := ops[e.OperationID]; !ok {
				lost(e, ForgotOperation, fmt.Sprintf("operation %s was created, and is not in the operation store", e.OperationID))
			}
		case reference.EvStage:
			op, ok := ops[e.OperationID]
			switch {
			case !ok:
				lost(e, ForgotStage, fmt.Sprintf("operation %s advanced %s -> %s, and is not in the operation store", e.OperationID, e.From, e.To))
			case op.Stage.Rank() < e.To.Rank():
				lost(e, ForgotStage, fmt.Sprintf("operation %s advanced %s -> %s, and is stored at %s", e.OperationID, e.From, e.To, op.Stage))
			}
		case reference.EvStateCommit:
			st, ok := cur[e.DocumentID]
			switch {
			case !ok || st.Revision < e.Revision:
				have := "no state"
				if ok {
					have = fmt.Sprintf("revision %d", st.Revision)
				}
				lost(e, ForgotState, fmt.Sprintf("document %s was committed at revision %d by %s, and the store holds %s", e.DocumentID, e.Revision, e.OperationID, have))
			case st.Revision == e.Revision && st.OperationID != e.OperationID:
				lost(e, ForgotState, fmt.Sprintf("document %s was committed at revision %d by %s, and revision %d now belongs to %s", e.DocumentID, e.Revision, e.OperationID, e.Revision, st.OperationID))
			}
		case reference.EvVersion:
			found := false
			for _, v := range s.Versions[e.DocumentID] {
				if v.Revision == e.Revision && v.OperationID == e.OperationID {
					found = true
				}
			}
			if !found {
				lost(e, ForgotVersion, fmt.Sprintf("revision %d of document %s (by %s) was recorded in the version history, and is not there", e.Revision, e.DocumentID, e.OperationID))
			}
		case reference.EvGraphBatch:
			if e.Batch == nil {
				continue
			}
			for _, k := range e.Batch.DeleteEdges {
				if _, seen := edges[k]; !seen {
					edgeOrder = append(edgeOrder, k)
				}
				edges[k] = graphWrite{e, false}
			}
			for _, u := range e.Batch.UpsertEdges {
				if _, seen := edges[u.Key]; !seen {
					edgeOrder = append(edgeOrder, u.Key)
				}
				edges[u.Key] = graphWrite{e, true}
			}
			for _, id := range e.Batch.DeleteNodes {
				if _, seen := nodes[id]; !seen {
					nodeOrder = append(nodeOrder, id)
				}
				nodes[id] = graphWrite{e, false}
			}
			for _, n := range e.Batch.UpsertNodes {
				if _, seen := nodes[n.ID]; !seen {
					nodeOrder = append(nodeOrder, n.ID)
				}
				nodes[n.ID] = graphWrite{e, true}
			}
		}
	}
	if graph {
		for _, id := range nodeOrder {
			if _, have := s.Graph.Nodes[id]; nodes[id].upsert && !have {
				w := nodes[id]
				lost(w.e, ForgotGraphNode, fmt.Sprintf("graph batch %s of %s upserted node %s, and the graph lacks it", w.e.Detail, w.e.OperationID, id))
			}
		}
		for _, k := range edgeOrder {
			if _, have := s.Graph.Edges[k]; edges[k].upsert && !have {
				w := edges[k]
				lost(w.e, ForgotGraphEdge, fmt.Sprintf("graph batch %s of %s upserted edge %s, and the graph lacks it", w.e.Detail, w.e.OperationID, k))
			}
		}
	}
	rows := map[int64]bool{}
	for _, r := range s.PlanRows {
		rows[r.ID] = true
	}
	for _, id := range saved {
		if !rows[id] {
			out = append(out, Violation{Invariant: I9, Forgot: ForgotPlanRow, Message: fmt.Sprintf("an acknowledged write is missing %s: a save returned plan row %d, and the plan table lacks it", when, id),
				Evidence: []string{fmt.Sprintf("plan rows now: %d", len(s.PlanRows))}})
		}
	}
	return out
}
