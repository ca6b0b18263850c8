package properties

import (
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/crashmatrix/crashmatrix/reference"
)

// The subtest names of the Concurrency suite: each runs concurrent
// clients (writers and readers at once) against one store and checks the
// recorded history for linearizability against a sequential model with
// porcupine.
const (
	subLinOperations = "OperationsLinearizable" // create, stage CAS, Get and GetPlan: never an operation without its plan
	subLinStates     = "StatesLinearizable"     // revision CAS, version rows, reads by operationId
	subLinLeases     = "LeasesLinearizable"     // acquire, renew, release with expiry: never two live holders
	subLinGraph      = "GraphLinearizable"      // concurrent mutations and reads: all of a mutation or none
)

// linRounds is how many times each linearizability check runs.
const linRounds = 3

// runConcurrency runs the linearizability checks of every store the bundle
// has.
func runConcurrency(t suiteT, opened func(t suiteT) reference.Stores) {
	t.Helper()
	probe := opened(t)
	for _, c := range []struct {
		name string
		has  bool
		run  func(t suiteT, st reference.Stores, space string)
	}{
		{subLinOperations, probe.Ops != nil, linOperations},
		{subLinStates, probe.States != nil, linStates},
		{subLinLeases, probe.Locks != nil, linLeases},
		{subLinGraph, probe.Writer != nil, linGraph},
	} {
		t.Run(c.name, func(t suiteT) {
			if !c.has {
				t.Skipf("the bundle has no store for %s", c.name)
			}
			defer func() {
				if t.Failed() {
					t.Logf("reproduce: go test -run '%s'", confRunPattern(t.Name()))
				}
			}()
			// A few rounds on fresh keys: a race window is hit by chance,
			// so more rounds catch more; the first failing round stops.
			st := opened(t)
			for round := 1; round <= linRounds && !t.Failed(); round++ {
				c.run(t, st, fmt.Sprintf("space_lin%d", round))
			}
		})
	}
}

// linHistory records a concurrent history for porcupine: each call's
// input, output and the times it was invoked and returned.
type linHistory struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func newLinHistory() *linHistory { return &linHistory{start: time.Now()} }

// call runs f as client's operation with input in, recording its output.
func (h *linHistory) call(client int, in any, f func() any) any {
	call := time.Since(h.start).Nanoseconds()
	out := f()
	ret := time.Since(h.start).Nanoseconds()
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
	h.mu.Unlock()
	return out
}

// linClients runs n clients at once.
func linClients(n int, body func(client int)) {
	confRace(n, func(i int) struct{} { body(i); return struct{}{} })
}

// linPace spaces a reader's calls out a little, so that its reads spread
// over the writers' whole run (and land in their windows) instead of
// bursting before the writers get going.
func linPace() { time.Sleep(10 * time.Microsecond) }

// linCheck checks the history against model and fails t with the
// operations of the key that has no linearization and a porcupine
// visualisation to open.
func linCheck(t suiteT, what string, model porcupine.Model, h *linHistory) {
	t.Helper()
	model.Hash = func(s any) uint64 {
		f := fnv.New64a()
		fmt.Fprint(f, model.DescribeState(s))
		return f.Sum64()
	}
	res, info := porcupine.CheckOperationsVerbose(model, h.ops, 20*time.Second)
	switch res {
	case porcupine.Ok:
		return
	case porcupine.Unknown:
		t.Errorf("%s: the linearizability check of %d operations timed out (verdict unknown)", what, len(h.ops))
		return
	}
	where := ""
	if len(h.ops) > 20000 {
		where = " (too many operations for a visualisation)"
	} else if f, err := os.CreateTemp(linVisDir(t), "crashmatrix-linearizability-*.html"); err == nil {
		if porcupine.Visualize(model, info, f) == nil {
			where = "\nporcupine visualisation (open in a browser): " + f.Name()
		}
		f.Close()
	}
	t.Errorf("%s: the history of %d concurrent operations is not linearizable: no order of the calls explains what the readers saw%s\n%s",
		what, len(h.ops), where, linIllegalPart(model, h.ops))
}

// linVisDir is where a visualisation goes: the system temporary directory
// (kept for a person to open), or a recorder's own (removed with it).
func linVisDir(t suiteT) string {
	if r, ok := t.(*recorder); ok {
		return r.TempDir()
	}
	return ""
}

// linIllegalPart lists, in call order, the operations of the first key
// (partition) that has no linearization.
func linIllegalPart(model porcupine.Model, ops []porcupine.Operation) string {
	parts := [][]porcupine.Operation{ops}
	if model.Partition != nil {
		parts = model.Partition(ops)
	}
	for _, p := range parts {
		if porcupine.CheckOperations(model, p) {
			continue
		}
		sorted := append([]porcupine.Operation(nil), p...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
		var b strings.Builder
		for i, o := range sorted {
			if i == 60 {
				fmt.Fprintf(&b, "  … %d more\n", len(sorted)-i)
				break
			}
			fmt.Fprintf(&b, "  client %d [%7d µs, %7d µs] %s\n", o.ClientId, o.Call/1000, o.Return/1000, model.DescribeOperation(o.Input, o.Output))
		}
		return b.String()
	}
	return ""
}

// linPartition splits a history by the key its inputs name.
func linPartition[I interface{ key() string }](ops []porcupine.Operation) [][]porcupine.Operation {
	by := map[string][]porcupine.Operation{}
	var keys []string
	for _, o := range ops {
		k := o.Input.(I).key()
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], o)
	}
	sort.Strings(keys)
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, by[k])
	}
	return out
}

func linErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// ---------------------------------------------------------------------------
// OperationStore: several creators race on each operationId (one plan each),
// an advancer walks the stages with CAS, readers Get and GetPlan all along.

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

type linStateIn struct {
	Doc      string
	Kind     string // cas, record, current, byop, versions
	Expected int64
	Rev      int64
	Op       string
}

func (i linStateIn) key() string { return i.Doc }

type linStateOut struct {
	OK   bool
	Rev  int64
	Op   string
	Revs string // versions: "1:op,2:op"
	Err  string
}

type linStateState struct {
	Rev  int64
	Op   string
	Hist string // sorted "rev:op," of the recorded versions
}

func (s linStateState) has(op string) (int64, bool) {
	if s.Rev > 0 && s.Op == op {
		return s.Rev, true
	}
	for _, e := range strings.Split(s.Hist, ",") {
		if r, o, ok := strings.Cut(e, ":"); ok && o == op {
			var n int64
			fmt.Sscan(r, &n)
			return n, true
		}
	}
	return 0, false
}

func linAddVersion(hist string, rev int64, op string) string {
	entry := fmt.Sprintf("%d:%s", rev, op)
	var es []string
	if hist != "" {
		es = strings.Split(hist, ",")
	}
	for _, e := range es {
		if strings.HasPrefix(e, fmt.Sprintf("%d:", rev)) {
			return hist // recording a revision again is a no-op
		}
	}
	es = append(es, entry)
	sort.Slice(es, func(i, j int) bool {
		var a, b int64
		fmt.Sscan(es[i], &a)
		fmt.Sscan(es[j], &b)
		return a < b
	})
	return strings.Join(es, ",")
}

func linStatesModel() porcupine.Model {
	return porcupine.Model{
		Partition: linPartition[linStateIn],
		Init:      func() any { return linStateState{} },
		Step: func(s, in, out any) (bool, any) {
			st, i, o := s.(linStateState), in.(linStateIn), out.(linStateOut)
			if o.Err != "" {
				return false, st
			}
			switch i.Kind {
			case "cas":
				if st.Rev == i.Expected {
					if !o.OK {
						return false, st
					}
					st.Rev, st.Op = i.Rev, i.Op
					return true, st
				}
				return !o.OK, st
			case "record":
				st.Hist = linAddVersion(st.Hist, i.Rev, i.Op)
				return true, st
			case "current":
				if st.Rev == 0 {
					return !o.OK, st
				}
				return o.OK && o.Rev == st.Rev && o.Op == st.Op, st
			case "byop":
				rev, ok := st.has(i.Op)
				return o.OK == ok && (!ok || o.Rev == rev), st
			case "versions":
				return o.Revs == st.Hist, st
			}
			return false, st
		},
		DescribeOperation: func(in, out any) string {
			i, o := in.(linStateIn), out.(linStateOut)
			switch {
			case o.Err != "":
				return fmt.Sprintf("%s %s -> error %s", i.Kind, i.Doc, o.Err)
			case i.Kind == "cas":
				return fmt.Sprintf("CompareAndSet(%d -> %d by %s) -> %v", i.Expected, i.Rev, i.Op, o.OK)
			case i.Kind == "record":
				return fmt.Sprintf("RecordVersion(%d by %s)", i.Rev, i.Op)
			case i.Kind == "current":
				return fmt.Sprintf("FindCurrent -> found %v revision %d by %s", o.OK, o.Rev, o.Op)
			case i.Kind == "byop":
				return fmt.Sprintf("FindByOperationID(%s) -> found %v revision %d", i.Op, o.OK, o.Rev)
			}
			return fmt.Sprintf("Versions -> [%s]", o.Revs)
		},
		DescribeState: func(s any) string { return fmt.Sprintf("%+v", s.(linStateState)) },
	}
}

func linStates(t suiteT, st reference.Stores, space string) {
	states := st.States
	const writers, readers, top = 3, 2, 6
	docs := []string{"lin-doc-1", "lin-doc-2"}
	h := newLinHistory()
	var done atomic.Int32
	state := func(doc string, rev int64, op string) reference.DocumentState {
		return reference.DocumentState{Space: space, DocumentID: doc, Revision: rev, OperationID: op,
			ContentHash: "h-" + op, Status: reference.DocActive}
	}
	current := func(c int, doc string) (reference.DocumentState, bool) {
		var cur reference.DocumentState
		o := h.call(c, linStateIn{Doc: doc, Kind: "current"}, func() any {
			s, ok, err := states.FindCurrent(confCtx, space, doc)
			cur = s
			return linStateOut{OK: ok, Rev: s.Revision, Op: s.OperationID, Err: linErr(err)}
		}).(linStateOut)
		return cur, o.OK && o.Err == ""
	}
	var finished atomic.Int32
	linClients(writers+readers, func(c int) {
		if c < writers {
			defer func() {
				if finished.Add(1) == writers {
					done.Store(1)
				}
			}()
			for _, doc := range docs {
				for n := 0; n < 40; n++ {
					cur, ok := current(c, doc)
					var exp int64
					if ok {
						exp = cur.Revision
						if exp >= top {
							break
						}
						h.call(c, linStateIn{Doc: doc, Kind: "record", Rev: cur.Revision, Op: cur.OperationID}, func() any {
							return linStateOut{OK: true, Err: linErr(states.RecordVersion(confCtx, cur))}
						})
					}
					op := fmt.Sprintf("w%d-r%d", c, exp+1)
					h.call(c, linStateIn{Doc: doc, Kind: "cas", Expected: exp, Rev: exp + 1, Op: op}, func() any {
						ok, err := states.CompareAndSet(confCtx, exp, state(doc, exp+1, op))
						return linStateOut{OK: ok, Err: linErr(err)}
					})
				}
			}
			return
		}
		for n := 0; (done.Load() == 0 || n < 10) && n < 3000; n++ {
			linPace()
			doc := docs[n%len(docs)]
			switch n % 3 {
			case 0:
				current(c, doc)
			case 1:
				op := fmt.Sprintf("w%d-r%d", n%writers, 1+n%top)
				h.call(c, linStateIn{Doc: doc, Kind: "byop", Op: op}, func() any {
					s, ok, err := states.FindByOperationID(confCtx, space, doc, op)
					return linStateOut{OK: ok, Rev: s.Revision, Err: linErr(err)}
				})
			default:
				h.call(c, linStateIn{Doc: doc, Kind: "versions"}, func() any {
					vs, err := states.Versions(confCtx, space, doc)
					hist := ""
					for _, v := range vs {
						hist = linAddVersion(hist, v.Revision, v.OperationID)
					}
					return linStateOut{OK: true, Revs: hist, Err: linErr(err)}
				})
			}
		}
	})
	linCheck(t, "DocumentStateStore", linStatesModel(), h)
}

// ---------------------------------------------------------------------------
// LockProvider: holders contend for two documents with short leases on a
// shared logical clock (so leases also expire under contention); each
// holder acquires, renews and releases.

type linLeaseIn struct {
	Doc    string
	Kind   string // acquire, renew, release
	Holder string
	Token  int64
	Now    int64
}

func (i linLeaseIn) key() string { return i.Doc }

type linLeaseOut struct {
	OK    bool
	Token int64
	Exp   int64
	Err   string
}

type linLeaseState struct {
	Holder string
	Token  int64
	Exp    int64
	Last   int64
}

const linLeaseTTL = 6

func linLeasesModel() porcupine.Model {
	return porcupine.Model{
		Partition: linPartition[linLeaseIn],
		Init:      func() any { return linLeaseState{} },
		Step: func(s, in, out any) (bool, any) {
			st, i, o := s.(linLeaseState), in.(linLeaseIn), out.(linLeaseOut)
			live := st.Holder != "" && i.Now < st.Exp
			switch i.Kind {
			case "acquire":
				if o.Err != "" {
					return false, st
				}
				if live && st.Holder != i.Holder {
					return !o.OK, st
				}
				if !o.OK || o.Exp != i.Now+linLeaseTTL {
					return false, st
				}
				if live { // the holder's own live lease: renewed, same token
					if o.Token != st.Token {
						return false, st
					}
				} else if o.Token <= st.Last && !(st.Holder == i.Holder && o.Token == st.Token) {
					return false, st
				}
				last := max(st.Last, o.Token)
				return true, linLeaseState{Holder: i.Holder, Token: o.Token, Exp: o.Exp, Last: last}
			case "renew":
				ok := live && st.Holder == i.Holder && st.Token == i.Token
				if !ok {
					return !o.OK, st
				}
				if !o.OK || o.Token != st.Token || o.Exp != i.Now+linLeaseTTL {
					return false, st
				}
				st.Exp = o.Exp
				return true, st
			case "release":
				mine := st.Holder == i.Holder && st.Token == i.Token
				switch {
				case mine && live:
					if !o.OK {
						return false, st
					}
					return true, linLeaseState{Last: st.Last}
				case mine: // expired but not taken: either answer is fine
					if o.OK {
						return true, linLeaseState{Last: st.Last}
					}
					return true, st
				}
				return !o.OK, st
			}
			return false, st
		},
		DescribeOperation: func(in, out any) string {
			i, o := in.(linLeaseIn), out.(linLeaseOut)
			res := fmt.Sprintf("ok %v token %d until %d", o.OK, o.Token, o.Exp)
			if o.Err != "" {
				res = "error " + o.Err
			}
			switch i.Kind {
			case "acquire":
				return fmt.Sprintf("TryAcquire(%s, now %d) -> %s", i.Holder, i.Now, res)
			case "renew":
				return fmt.Sprintf("Renew(%s token %d, now %d) -> %s", i.Holder, i.Token, i.Now, res)
			}
			return fmt.Sprintf("Release(%s token %d) -> %s", i.Holder, i.Token, res)
		},
		DescribeState: func(s any) string { return fmt.Sprintf("%+v", s.(linLeaseState)) },
	}
}

func linLeases(t suiteT, st reference.Stores, space string) {
	locks := st.Locks
	docs := []string{"lin-lease-1", "lin-lease-2"}
	h := newLinHistory()
	var clock atomic.Int64
	clock.Store(confNow)
	const holders = 4
	linClients(holders, func(c int) {
		holder := fmt.Sprintf("holder-%d", c)
		for n := 0; n < 30; n++ {
			doc := docs[(n+c)%len(docs)]
			now := clock.Add(1)
			var lease reference.Lease
			got := h.call(c, linLeaseIn{Doc: doc, Kind: "acquire", Holder: holder, Now: now}, func() any {
				l, ok, err := locks.TryAcquire(confCtx, space, doc, holder, now, linLeaseTTL)
				lease = l
				if !ok {
					return linLeaseOut{Err: linErr(err)}
				}
				return linLeaseOut{OK: true, Token: l.Token, Exp: l.ExpiresAt, Err: linErr(err)}
			}).(linLeaseOut)
			if !got.OK {
				continue
			}
			if n%2 == 0 {
				now := clock.Add(1)
				h.call(c, linLeaseIn{Doc: doc, Kind: "renew", Holder: holder, Token: lease.Token, Now: now}, func() any {
					l, err := locks.Renew(confCtx, lease, now, linLeaseTTL)
					if errors.Is(err, reference.ErrLeaseLost) {
						return linLeaseOut{}
					}
					if err == nil {
						lease = l
					}
					return linLeaseOut{OK: err == nil, Token: l.Token, Exp: l.ExpiresAt, Err: linErr(err)}
				})
			}
			if n%3 != 2 { // sometimes a holder walks away and lets the lease expire
				h.call(c, linLeaseIn{Doc: doc, Kind: "release", Holder: holder, Token: lease.Token}, func() any {
					err := locks.Release(confCtx, lease)
					if errors.Is(err, reference.ErrLeaseLost) {
						return linLeaseOut{}
					}
					return linLeaseOut{OK: err == nil, Err: linErr(err)}
				})
			}
		}
	})
	linCheck(t, "LockProvider", linLeasesModel(), h)
}

// ---------------------------------------------------------------------------
// GraphWriter: writers apply mutations (each moves its own node, patches a
// shared hub and links the two), readers read the whole graph all along;
// every read must be the fold of some prefix of the applied mutations.

type linGraphIn struct {
	Apply *reference.Mutation
}

type linGraphOut struct {
	Graph string // read: canonical form
	Err   string
}

type linGraphState struct {
	g   reference.Graph
	key string
}

func linGraphKey(g reference.Graph) string {
	var lines []string
	for id, n := range g.Nodes {
		lines = append(lines, fmt.Sprintf("n %s %s %s", id, n.Label, linProps(n.Properties)))
	}
	for k, e := range g.Edges {
		lines = append(lines, fmt.Sprintf("e %s %s", k, linProps(e.Properties)))
	}
	sort.Strings(lines)
	return strings.Join(lines, "; ")
}

func linProps(m map[string]string) string {
	var kv []string
	for k, v := range m {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return "{" + strings.Join(kv, ",") + "}"
}

// linCloneGraph copies g deeply (Apply patches property maps in place).
func linCloneGraph(g reference.Graph) reference.Graph {
	out := reference.NewGraph()
	for id, n := range g.Nodes {
		n.Properties = maps.Clone(n.Properties)
		out.Nodes[id] = n
	}
	for k, e := range g.Edges {
		e.Properties = maps.Clone(e.Properties)
		out.Edges[k] = e
	}
	return out
}

func linGraphModel() porcupine.Model {
	return porcupine.Model{
		Init: func() any { g := reference.NewGraph(); return &linGraphState{g, linGraphKey(g)} },
		Step: func(s, in, out any) (bool, any) {
			st, i, o := s.(*linGraphState), in.(linGraphIn), out.(linGraphOut)
			if o.Err != "" {
				return false, st
			}
			if i.Apply == nil {
				return o.Graph == st.key, st
			}
			g := linCloneGraph(st.g)
			if err := g.Apply(*i.Apply); err != nil {
				return false, st
			}
			return true, &linGraphState{g, linGraphKey(g)}
		},
		Equal: func(a, b any) bool { return a.(*linGraphState).key == b.(*linGraphState).key },
		DescribeOperation: func(in, out any) string {
			i, o := in.(linGraphIn), out.(linGraphOut)
			if o.Err != "" {
				return "error " + o.Err
			}
			if i.Apply != nil {
				return fmt.Sprintf("Apply(%s)", i.Apply.OperationID)
			}
			return "ReadGraph -> " + o.Graph
		},
		DescribeState: func(s any) string { return s.(*linGraphState).key },
	}
}

func linGraph(t suiteT, st reference.Stores, space string) {
	w := st.Writer
	const writers, readers, rounds = 3, 2, 6
	h := newLinHistory()
	var finished atomic.Int32
	linClients(writers+readers, func(c int) {
		if c < writers {
			defer finished.Add(1)
			for r := 0; r < rounds; r++ {
				id := fmt.Sprintf("n%d-%d", c, r)
				m := reference.Mutation{OperationID: fmt.Sprintf("w%d-m%d", c, r),
					UpsertNodes: []reference.NodeUpsert{
						{ID: "hub", Label: "Hub", Properties: map[string]string{fmt.Sprintf("w%d", c): fmt.Sprint(r)}},
						{ID: id, Label: "L", Properties: map[string]string{"round": fmt.Sprint(r)}},
					},
					UpsertEdges: []reference.EdgeUpsert{{Key: reference.EdgeKey{Source: id, Type: "AT", Target: "hub"}}},
				}
				if r > 0 {
					m.DeleteNodes = []string{fmt.Sprintf("n%d-%d", c, r-1)}
				}
				h.call(c, linGraphIn{Apply: &m}, func() any {
					return linGraphOut{Err: linErr(w.Apply(confCtx, space, m))}
				})
			}
			return
		}
		for n := 0; (finished.Load() < writers || n < 5) && n < 3000; n++ {
			linPace()
			h.call(c, linGraphIn{}, func() any {
				g, err := w.ReadGraph(confCtx, space)
				if err != nil {
					return linGraphOut{Err: err.Error()}
				}
				return linGraphOut{Graph: linGraphKey(g)}
			})
		}
	})
	linCheck(t, "GraphWriter", linGraphModel(), h)
}
