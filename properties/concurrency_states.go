package properties

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/anishathalye/porcupine"

	"github.com/crashmatrix/crashmatrix/reference"
)

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
