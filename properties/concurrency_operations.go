package properties

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/crashmatrix/crashmatrix/reference"
)

type linOpIn struct {
	Op   string
	Kind string // create, get, plan, cas
	Plan string // create: whose plan; cas: from stage
	To   reference.Stage
}

func (i linOpIn) key() string { return i.Op }

type linOpOut struct {
	OK    bool            // create: created; get/plan: found; cas: swapped
	Stage reference.Stage // get
	Plan  string          // plan: whose plan came back
	Err   string
}

type linOpState struct {
	Created bool
	Plan    string
	Stage   reference.Stage
}

func linOperationsModel() porcupine.Model {
	return porcupine.Model{
		Partition: linPartition[linOpIn],
		Init:      func() any { return linOpState{} },
		Step: func(s, in, out any) (bool, any) {
			st, i, o := s.(linOpState), in.(linOpIn), out.(linOpOut)
			if o.Err != "" {
				return false, st
			}
			switch i.Kind {
			case "create":
				if st.Created {
					return !o.OK, st
				}
				return o.OK, linOpState{Created: true, Plan: i.Plan, Stage: reference.Prepared}
			case "get":
				return o.OK == st.Created && (!o.OK || o.Stage == st.Stage), st
			case "plan":
				return o.OK == st.Created && (!o.OK || o.Plan == st.Plan), st
			case "cas":
				if st.Created && st.Stage == reference.Stage(i.Plan) {
					if !o.OK {
						return false, st
					}
					st.Stage = i.To
					return true, st
				}
				return !o.OK, st
			}
			return false, st
		},
		DescribeOperation: func(in, out any) string {
			i, o := in.(linOpIn), out.(linOpOut)
			switch {
			case o.Err != "":
				return fmt.Sprintf("%s %s -> error %s", i.Kind, i.Op, o.Err)
			case i.Kind == "create":
				return fmt.Sprintf("CreateIfAbsent(%s, plan of %s) -> %v", i.Op, i.Plan, o.OK)
			case i.Kind == "get":
				return fmt.Sprintf("Get(%s) -> found %v stage %s", i.Op, o.OK, o.Stage)
			case i.Kind == "plan":
				return fmt.Sprintf("GetPlan(%s) -> found %v plan of %q", i.Op, o.OK, o.Plan)
			}
			return fmt.Sprintf("CompareAndSet(%s, %s -> %s) -> %v", i.Op, i.Plan, i.To, o.OK)
		},
		DescribeState: func(s any) string { return fmt.Sprintf("%+v", s.(linOpState)) },
	}
}

func linOperations(t suiteT, st reference.Stores, space string) {
	ops := st.Ops
	ids := []string{space + "-op-1", space + "-op-2", space + "-op-3"}
	h := newLinHistory()
	var done atomic.Int32
	const creators = 3
	stages := []reference.Stage{reference.Prepared, reference.GraphApplied, reference.StateCommitted, reference.Completed}
	linClients(creators+3, func(c int) {
		switch {
		case c < creators: // creators: each offers its own plan for every id
			who := fmt.Sprintf("creator-%d", c)
			for _, id := range ids {
				p := confPlan(id, space, "doc-"+id, 0)
				p.Content = who
				h.call(c, linOpIn{Op: id, Kind: "create", Plan: who}, func() any {
					ok, err := ops.CreateIfAbsent(confCtx, confOp(p, confNow), p)
					return linOpOut{OK: ok, Err: linErr(err)}
				})
			}
		case c == creators: // the advancer walks every id to COMPLETED
			defer done.Store(1)
			for _, id := range ids {
				// Bounded: a broken store may never show the next stage.
				for step, tries := 0, 0; step < 3 && tries < 500; tries++ {
					var cur reference.Operation
					found := h.call(c, linOpIn{Op: id, Kind: "get"}, func() any {
						op, err := ops.Get(confCtx, id)
						if errors.Is(err, reference.ErrNotFound) {
							return linOpOut{}
						}
						cur = op
						return linOpOut{OK: err == nil, Stage: op.Stage, Err: linErr(err)}
					}).(linOpOut)
					if !found.OK {
						time.Sleep(20 * time.Microsecond)
						continue
					}
					from := cur.Stage
					idx := 0
					for k, s := range stages {
						if s == from {
							idx = k
						}
					}
					if idx == len(stages)-1 {
						break
					}
					next := cur
					next.Stage, next.UpdatedAt = stages[idx+1], cur.UpdatedAt+1
					h.call(c, linOpIn{Op: id, Kind: "cas", Plan: string(from), To: next.Stage}, func() any {
						ok, err := ops.CompareAndSet(confCtx, cur, next)
						return linOpOut{OK: ok, Err: linErr(err)}
					})
					if step == idx+1 { // no progress: the store showed a stage already left
						time.Sleep(20 * time.Microsecond)
					}
					step = idx + 1
				}
			}
		default: // readers
			for n := 0; done.Load() == 0 || n < 10; n++ {
				linPace()
				id := ids[n%len(ids)]
				h.call(c, linOpIn{Op: id, Kind: "get"}, func() any {
					op, err := ops.Get(confCtx, id)
					if errors.Is(err, reference.ErrNotFound) {
						return linOpOut{}
					}
					return linOpOut{OK: err == nil, Stage: op.Stage, Err: linErr(err)}
				})
				h.call(c, linOpIn{Op: id, Kind: "plan"}, func() any {
					p, err := ops.GetPlan(confCtx, id)
					if errors.Is(err, reference.ErrNotFound) || errors.Is(err, reference.ErrNoPersistedPlan) {
						return linOpOut{}
					}
					return linOpOut{OK: err == nil, Plan: p.Content, Err: linErr(err)}
				})
				if n > 1500 {
					return
				}
			}
		}
	})
	linCheck(t, "OperationStore", linOperationsModel(), h)
}

// ---------------------------------------------------------------------------
// DocumentStateStore: writers advance one document's revision as the
// service does (record the current state as a version, then CAS), readers
// read the current state, states by operationId and the versions.
