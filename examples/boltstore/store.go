// Package boltstore is a third-party-style store for crashmatrix, written
// from the store-author guide alone (docs/certify-go-store.md): the five stores of
// reference.Stores on one bbolt file. It is an example module, with its own
// go.mod, that certifies with properties.Stores and
// properties.CertifyCrashSafety on its first run (store_test.go).
//
// bbolt locks its file for one process at a time, and the crash matrix runs
// several worker processes on one case's data (a stalled worker still holds
// its handle while the next one works). So every call opens the file, runs
// one transaction and closes it: a call is atomic and durable (bbolt
// fsyncs each commit), and calls from any number of processes serialise on
// the file lock.
package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/bbolt"

	"github.com/crashmatrix/crashmatrix/reference"
)

var (
	bOps      = []byte("operations")
	bStates   = []byte("states")
	bVersions = []byte("versions")
	bNames    = []byte("names")
	bEntities = []byte("entities")
	bNodes    = []byte("nodes")
	bEdges    = []byte("edges")
	bLeases   = []byte("leases")
	bTokens   = []byte("tokens")
	// bPlans holds the plans of layout 2 (Options.Layout), bMeta the
	// layout a file was migrated to.
	bPlans = []byte("plans")
	bMeta  = []byte("meta")
)

// DB is one bbolt file; every store of a bundle shares it.
type DB struct {
	path string
	o    Options
	mu   sync.Mutex // one transaction of this process at a time
}

// Options change how the stores use bbolt.
type Options struct {
	// NoSync skips bbolt's fsync at each commit: faster, and a commit
	// survives a process crash but not a power loss (the certification's
	// power-loss column shows it).
	NoSync bool
	// TwoUpdates is a deliberate defect: CreateIfAbsent writes the
	// operation in one Update and its plan in a second, with no window
	// declared between them. The crash matrix's durable-step sweep finds
	// the gap from bbolt's own syncs and fails it (I5).
	TwoUpdates bool
	// Layout 2 is the store's next release: each operation's plan lives
	// in a bucket of its own ("plans") instead of inside the operation's
	// record. The first open of a file layout 1 wrote migrates it, in one
	// Update: every plan in a record is copied to the bucket (and kept in
	// the record, so that a process of the first release still running
	// during a rolling deploy reads it), and the file is marked as
	// layout 2. 0 or 1 is the first release's layout.
	Layout int
	// MigrateFinishedOnly is a deliberate defect of layout 2's
	// migration: it copies the plans of finished operations only, as a
	// migration written for a drained deploy would. An operation in
	// flight when the new release came up keeps its plan where layout 2
	// no longer reads it, and recovery cannot resume it. Upgrading mid-
	// flight (properties.CrashOptions.RecoverWith) fails it (I5).
	MigrateFinishedOnly bool
}

// Open returns the stores on the bbolt file at path, creating the file and
// its directory if needed.
func Open(path string) (reference.Stores, error) { return OpenWith(path, Options{}) }

// OpenWith is Open with options.
func OpenWith(path string, o Options) (reference.Stores, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return reference.Stores{}, err
	}
	d := &DB{path: path, o: o}
	if err := d.update(func(tx *bbolt.Tx) error {
		buckets := [][]byte{bOps, bStates, bVersions, bNames, bEntities, bNodes, bEdges, bLeases, bTokens}
		if o.Layout == 2 {
			buckets = append(buckets, bPlans, bMeta)
		}
		for _, b := range buckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if o.Layout == 2 {
			return migratePlans(tx, o.MigrateFinishedOnly)
		}
		return nil
	}); err != nil {
		return reference.Stores{}, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	// bbolt syncs the file, not the directory that names it: until the
	// directory is synced too, a power loss can take the whole file away
	// (crashmatrix's power-loss column found that).
	if err := syncDir(filepath.Dir(path)); err != nil {
		return reference.Stores{}, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	return reference.Stores{Ops: &Ops{d}, States: &States{d}, Registry: &Registry{d}, Writer: &Writer{d}, Locks: &Locks{d}}, nil
}

func (d *DB) run(ctx context.Context, write bool, f func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	db, err := bbolt.Open(d.path, 0o600, &bbolt.Options{Timeout: 30 * time.Second, NoSync: d.o.NoSync})
	if err != nil {
		return fmt.Errorf("boltstore: %s: %w", d.path, err)
	}
	defer db.Close()
	if write {
		return db.Update(f)
	}
	return db.View(f)
}

// syncDir makes the names in dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func (d *DB) update(f func(tx *bbolt.Tx) error) error { return d.run(context.Background(), true, f) }

// key joins parts with a zero byte (no part contains one).
func key(parts ...string) []byte { return []byte(strings.Join(parts, "\x00")) }

func prefix(parts ...string) []byte { return append(key(parts...), 0) }

func put(b *bbolt.Bucket, k []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(k, raw)
}

func get(b *bbolt.Bucket, k []byte, v any) (bool, error) {
	raw := b.Get(k)
	if raw == nil {
		return false, nil
	}
	return true, json.Unmarshal(raw, v)
}

// scan calls f for every key under p.
func scan(b *bbolt.Bucket, p []byte, f func(k, v []byte) error) error {
	c := b.Cursor()
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		if err := f(k, v); err != nil {
			return err
		}
	}
	return nil
}

// ---------------------------------------------------------------------------
// OperationStore

// Ops is a reference.OperationStore: one record per operationId holding
// the operation and its encoded plan, written in one transaction.
type Ops struct{ d *DB }

type opRecord struct {
	Op   reference.Operation `json:"op"`
	Plan []byte              `json:"plan"`
}

func notFound(id string) error { return fmt.Errorf("operation %s: %w", id, reference.ErrNotFound) }

// migratePlans copies the plans layout 1 kept in the operations' records
// to layout 2's bucket (only those of finished operations, with
// finishedOnly: the defect), once per file.
func migratePlans(tx *bbolt.Tx, finishedOnly bool) error {
	meta, layout := tx.Bucket(bMeta), []byte("layout")
	if string(meta.Get(layout)) == "2" {
		return nil
	}
	ops, plans := tx.Bucket(bOps), tx.Bucket(bPlans)
	err := ops.ForEach(func(k, v []byte) error {
		var r opRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		if len(r.Plan) == 0 || (finishedOnly && !r.Op.Finished()) {
			return nil
		}
		return plans.Put(k, r.Plan)
	})
	if err != nil {
		return err
	}
	return meta.Put(layout, []byte("2"))
}

// CreateIfAbsent implements reference.OperationStore.
func (s *Ops) CreateIfAbsent(ctx context.Context, op reference.Operation, plan reference.Plan) (bool, error) {
	if err := reference.CheckCreate(op, plan); err != nil {
		return false, err
	}
	payload, err := reference.EncodePlan(plan)
	if err != nil {
		return false, err
	}
	created := false
	err = s.d.run(ctx, true, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bOps)
		if b.Get([]byte(op.OperationID)) != nil {
			return nil
		}
		created = true
		if s.d.o.TwoUpdates {
			return put(b, []byte(op.OperationID), opRecord{Op: op})
		}
		if s.d.o.Layout == 2 {
			if err := tx.Bucket(bPlans).Put([]byte(op.OperationID), payload); err != nil {
				return err
			}
			return put(b, []byte(op.OperationID), opRecord{Op: op})
		}
		return put(b, []byte(op.OperationID), opRecord{op, payload})
	})
	if err != nil || !created || !s.d.o.TwoUpdates {
		return created, err
	}
	// The defect: the plan in a second Update.
	err = s.d.run(ctx, true, func(tx *bbolt.Tx) error {
		r, err := s.record(tx, op.OperationID)
		if err != nil {
			return err
		}
		r.Plan = payload
		return put(tx.Bucket(bOps), []byte(op.OperationID), r)
	})
	return err == nil, err
}

func (s *Ops) record(tx *bbolt.Tx, id string) (opRecord, error) {
	var r opRecord
	ok, err := get(tx.Bucket(bOps), []byte(id), &r)
	if err == nil && !ok {
		err = notFound(id)
	}
	return r, err
}

// Get implements reference.OperationStore.
func (s *Ops) Get(ctx context.Context, id string) (reference.Operation, error) {
	var r opRecord
	err := s.d.run(ctx, false, func(tx *bbolt.Tx) (err error) { r, err = s.record(tx, id); return })
	return r.Op, err
}

// GetPlan implements reference.OperationStore.
func (s *Ops) GetPlan(ctx context.Context, id string) (reference.Plan, error) {
	var r opRecord
	if err := s.d.run(ctx, false, func(tx *bbolt.Tx) (err error) {
		if r, err = s.record(tx, id); err == nil && s.d.o.Layout == 2 {
			r.Plan = bytes.Clone(tx.Bucket(bPlans).Get([]byte(id)))
		}
		return
	}); err != nil {
		return reference.Plan{}, err
	}
	return reference.DecodeStoredPlan(id, r.Plan, r.Op.PlanFingerprint)
}

// CompareAndSet implements reference.OperationStore.
func (s *Ops) CompareAndSet(ctx context.Context, expected, next reference.Operation) (bool, error) {
	if err := reference.ValidateUpdate(expected, next); err != nil {
		return false, err
	}
	swapped := false
	err := s.d.run(ctx, true, func(tx *bbolt.Tx) error {
		r, err := s.record(tx, expected.OperationID)
		if err != nil {
			return err
		}
		if !reference.MatchesExpected(r.Op, expected) {
			return nil
		}
		if err := reference.ValidateUpdate(r.Op, next); err != nil {
			return err
		}
		r.Op = reference.ApplyMutable(r.Op, next)
		swapped = true
		return put(tx.Bucket(bOps), []byte(expected.OperationID), r)
	})
	return swapped, err
}

func (s *Ops) all(ctx context.Context, keep func(reference.Operation) bool) ([]reference.Operation, error) {
	out := []reference.Operation{}
	err := s.d.run(ctx, false, func(tx *bbolt.Tx) error {
		return tx.Bucket(bOps).ForEach(func(_, v []byte) error {
			var r opRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			if keep(r.Op) {
				out = append(out, r.Op)
			}
			return nil
		})
	})
	return out, err // ForEach walks keys in order: by operationId
}

// ListRecoverable implements reference.OperationStore.
func (s *Ops) ListRecoverable(ctx context.Context, limit int) ([]reference.Operation, error) {
	if err := reference.CheckLimit(limit); err != nil {
		return nil, err
	}
	out, err := s.all(ctx, func(o reference.Operation) bool { return !o.Finished() })
	sort.SliceStable(out, func(i, j int) bool { return out[i].UpdatedAt < out[j].UpdatedAt })
	return out[:min(limit, len(out))], err
}

// List implements reference.OperationStore.
func (s *Ops) List(ctx context.Context) ([]reference.Operation, error) {
	return s.all(ctx, func(reference.Operation) bool { return true })
}

// Claim implements reference.OperationStore.
func (s *Ops) Claim(ctx context.Context, id, holder string, now, ttl int64) (bool, error) {
	if err := reference.CheckClaim(holder, ttl); err != nil {
		return false, err
	}
	claimed := false
	err := s.d.run(ctx, true, func(tx *bbolt.Tx) error {
		r, err := s.record(tx, id)
		if err != nil {
			return err
		}
		if r.Op.ClaimHolder != "" && r.Op.ClaimHolder != holder && now < r.Op.ClaimExpiresAt {
			return nil
		}
		r.Op.ClaimHolder, r.Op.ClaimExpiresAt = holder, now+ttl
		claimed = true
		return put(tx.Bucket(bOps), []byte(id), r)
	})
	return claimed, err
}

// ReleaseClaim implements reference.OperationStore.
func (s *Ops) ReleaseClaim(ctx context.Context, id, holder string) (bool, error) {
	released := false
	err := s.d.run(ctx, true, func(tx *bbolt.Tx) error {
		r, err := s.record(tx, id)
		if err != nil {
			return err
		}
		if strings.TrimSpace(holder) == "" || r.Op.ClaimHolder != holder {
			return nil
		}
		r.Op.ClaimHolder, r.Op.ClaimExpiresAt = "", 0
		released = true
		return put(tx.Bucket(bOps), []byte(id), r)
	})
	return released, err
}

// ---------------------------------------------------------------------------
// DocumentStateStore

// States is a reference.DocumentStateStore: the current state per
// document and its version rows keyed by revision.
type States struct{ d *DB }

func revKey(space, doc string, rev int64) []byte {
	k := prefix(space, doc)
	return binary.BigEndian.AppendUint64(k, uint64(rev))
}

// FindCurrent implements reference.DocumentStateStore.
func (s *States) FindCurrent(ctx context.Context, space, doc string) (reference.DocumentState, bool, error) {
	if err := reference.CheckKey(space, doc); err != nil {
		return reference.DocumentState{}, false, err
	}
	var st reference.DocumentState
	var ok bool
	err := s.d.run(ctx, false, func(tx *bbolt.Tx) (err error) {
		ok, err = get(tx.Bucket(bStates), key(space, doc), &st)
		return
	})
	return st, ok, err
}

// FindByOperationID implements reference.DocumentStateStore: the current
// state, else the newest version the operation committed.
func (s *States) FindByOperationID(ctx context.Context, space, doc, op string) (reference.DocumentState, bool, error) {
	if err := reference.CheckKey(space, doc); err != nil {
		return reference.DocumentState{}, false, err
	}
	if err := reference.CheckOperationID(op); err != nil {
		return reference.DocumentState{}, false, err
	}
	var found reference.DocumentState
	var ok bool
	err := s.d.run(ctx, false, func(tx *bbolt.Tx) error {
		var cur reference.DocumentState
		if has, err := get(tx.Bucket(bStates), key(space, doc), &cur); err != nil || (has && cur.OperationID == op) {
			found, ok = cur, has
			return err
		}
		return scan(tx.Bucket(bVersions), prefix(space, doc), func(_, v []byte) error {
			var st reference.DocumentState
			if err := json.Unmarshal(v, &st); err != nil {
				return err
			}
			if st.OperationID == op {
				found, ok = st, true // ascending: the last match is the newest
			}
			return nil
		})
	})
	return found, ok, err
}

// CompareAndSet implements reference.DocumentStateStore.
func (s *States) CompareAndSet(ctx context.Context, expected int64, next reference.DocumentState) (bool, error) {
	if err := reference.CheckStateCAS(expected, next); err != nil {
		return false, err
	}
	swapped := false
	err := s.d.run(ctx, true, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bStates)
		var cur reference.DocumentState
		has, err := get(b, key(next.Space, next.DocumentID), &cur)
		if err != nil {
			return err
		}
		if (expected == 0 && has) || (expected > 0 && (!has || cur.Revision != expected)) {
			return nil
		}
		swapped = true
		return put(b, key(next.Space, next.DocumentID), next)
	})
	return swapped, err
}

// Remove implements reference.DocumentStateStore.
func (s *States) Remove(ctx context.Context, space, doc string, revision int64) (bool, error) {
	if err := reference.CheckKey(space, doc); err != nil {
		return false, err
	}
	removed := false
	err := s.d.run(ctx, true, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bStates)
		var cur reference.DocumentState
		has, err := get(b, key(space, doc), &cur)
		if err != nil || !has || cur.Revision != revision {
			return err
		}
		removed = true
		return b.Delete(key(space, doc))
	})
	return removed, err
}

// RecordVersion implements reference.DocumentStateStore.
func (s *States) RecordVersion(ctx context.Context, st reference.DocumentState) error {
	if err := reference.CheckVersion(st); err != nil {
		return err
	}
	return s.d.run(ctx, true, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bVersions)
		if b.Get(revKey(st.Space, st.DocumentID, st.Revision)) != nil {
			return nil
		}
		return put(b, revKey(st.Space, st.DocumentID, st.Revision), st)
	})
}

// Versions implements reference.DocumentStateStore.
func (s *States) Versions(ctx context.Context, space, doc string) ([]reference.DocumentState, error) {
	if err := reference.CheckKey(space, doc); err != nil {
		return nil, err
	}
	out := []reference.DocumentState{}
	err := s.d.run(ctx, false, func(tx *bbolt.Tx) error {
		return scan(tx.Bucket(bVersions), prefix(space, doc), func(_, v []byte) error {
			var st reference.DocumentState
			err := json.Unmarshal(v, &st)
			out = append(out, st)
			return err
		})
	})
	return out, err
}

func (s *States) current(ctx context.Context, space string, f func(reference.DocumentState) error) error {
	return s.d.run(ctx, false, func(tx *bbolt.Tx) error {
		return scan(tx.Bucket(bStates), prefix(space), func(_, v []byte) error {
			var st reference.DocumentState
			if err := json.Unmarshal(v, &st); err != nil {
				return err
			}
			return f(st)
		})
	})
}

// List implements reference.DocumentStateStore.
func (s *States) List(ctx context.Context, space string) ([]reference.DocumentState, error) {
	if err := reference.CheckSpace(space); err != nil {
		return nil, err
	}
	out := []reference.DocumentState{}
	err := s.current(ctx, space, func(st reference.DocumentState) error { out = append(out, st); return nil })
	return out, err
}

// IsReferencedByOtherDocument implements reference.DocumentStateStore.
func (s *States) IsReferencedByOtherDocument(ctx context.Context, space, doc string, edge reference.EdgeKey) (bool, error) {
	if err := reference.CheckSpace(space); err != nil {
		return false, err
	}
	found := false
	err := s.current(ctx, space, func(st reference.DocumentState) error {
		if st.DocumentID != doc && st.Status == reference.DocActive && st.Supports(edge) {
			found = true
		}
		return nil
	})
	return found, err
}

// ---------------------------------------------------------------------------
// EntityRegistry

// Registry is a reference.EntityRegistry: a names bucket (space, type,
// name) -> node id, the unique key, and an entities bucket per node.
type Registry struct{ d *DB }

type entity struct {
	Type      string            `json:"type"`
	Canonical string            `json:"canonical"`
	Names     []string          `json:"names"`
	Props     map[string]string `json:"props,omitempty"`
}

func (e entity) view(space, id string) reference.RegisteredEntity {
	re := reference.RegisteredEntity{Space: space, NodeID: id, Type: e.Type, CanonicalName: e.Canonical, Names: slices.Clone(e.Names)}
	if len(e.Props) > 0 {
		re.Properties = maps.Clone(e.Props)
	}
	return re
}

// FindMatches implements reference.EntityRegistry.
func (r *Registry) FindMatches(ctx context.Context, space, typ string, names []string) ([]reference.RegisteredEntity, error) {
	if err := reference.CheckSpace(space); err != nil {
		return nil, err
	}
	out := []reference.RegisteredEntity{}
	err := r.d.run(ctx, false, func(tx *bbolt.Tx) error {
		ids := map[string]bool{}
		for _, n := range reference.NormalizeNames(names) {
			if id := tx.Bucket(bNames).Get(key(space, reference.Normalize(typ), n)); id != nil {
				ids[string(id)] = true
			}
		}
		for _, id := range slices.Sorted(maps.Keys(ids)) {
			var e entity
			if _, err := get(tx.Bucket(bEntities), key(space, id), &e); err != nil {
				return err
			}
			out = append(out, e.view(space, id))
		}
		return nil
	})
	return out, err
}

// SaveAll implements reference.EntityRegistry: all or nothing in one
// transaction.
func (r *Registry) SaveAll(ctx context.Context, space string, regs []reference.EntityRegistration) error {
	if err := reference.CheckSpace(space); err != nil {
		return err
	}
	for _, g := range regs {
		if err := reference.CheckRegistration(space, g); err != nil {
			return err
		}
	}
	return r.d.run(ctx, true, func(tx *bbolt.Tx) error {
		names, ents := tx.Bucket(bNames), tx.Bucket(bEntities)
		batch := map[string]string{}
		for _, g := range regs {
			typ := reference.Normalize(g.Type)
			for _, n := range g.NormalizedNames() {
				k := string(key(space, typ, n))
				if id := names.Get([]byte(k)); id != nil && string(id) != g.NodeID {
					return fmt.Errorf("name %q (type %s) is bound to %s, not %s: %w", n, typ, id, g.NodeID, reference.ErrRegistryConflict)
				}
				if id, ok := batch[k]; ok && id != g.NodeID {
					return fmt.Errorf("name %q (type %s) is bound to %s and %s in one batch: %w", n, typ, id, g.NodeID, reference.ErrRegistryConflict)
				}
				batch[k] = g.NodeID
			}
		}
		for _, g := range regs {
			var e entity
			has, err := get(ents, key(space, g.NodeID), &e)
			if err != nil {
				return err
			}
			if !has {
				e = entity{Type: strings.TrimSpace(g.Type), Canonical: strings.TrimSpace(g.CanonicalName), Props: map[string]string{}}
			}
			for _, n := range g.NormalizedNames() {
				if err := names.Put(key(space, reference.Normalize(g.Type), n), []byte(g.NodeID)); err != nil {
					return err
				}
				if !slices.Contains(e.Names, n) {
					e.Names = append(e.Names, n)
				}
			}
			slices.Sort(e.Names)
			if e.Props == nil {
				e.Props = map[string]string{}
			}
			maps.Copy(e.Props, g.Properties)
			if err := put(ents, key(space, g.NodeID), e); err != nil {
				return err
			}
		}
		return nil
	})
}

// List implements reference.EntityRegistry.
func (r *Registry) List(ctx context.Context, space string) ([]reference.RegisteredEntity, error) {
	out := []reference.RegisteredEntity{}
	err := r.d.run(ctx, false, func(tx *bbolt.Tx) error {
		p := prefix(space)
		return scan(tx.Bucket(bEntities), p, func(k, v []byte) error {
			var e entity
			err := json.Unmarshal(v, &e)
			out = append(out, e.view(space, string(k[len(p):])))
			return err
		})
	})
	return out, err
}

// ---------------------------------------------------------------------------
// GraphWriter

// Writer is a reference.GraphWriter: one record per (space, node id) and
// per (space, edge key), so an upsert merges by construction.
type Writer struct{ d *DB }

func edgeKey(space string, k reference.EdgeKey) []byte {
	return key(space, k.Source, k.Type, k.Target, fmt.Sprint(k.Rank))
}

// Apply implements reference.GraphWriter: the space's graph is folded
// with the mutation (reference.Graph.Apply: node deletes, edge deletes,
// node upserts, edge upserts; a missing endpoint changes nothing) and the
// changed records written, all in one transaction.
func (w *Writer) Apply(ctx context.Context, space string, m reference.Mutation) error {
	if err := reference.CheckMutation(space, m); err != nil {
		return err
	}
	return w.d.run(ctx, true, func(tx *bbolt.Tx) error {
		recs, err := records(tx, space)
		if err != nil {
			return err
		}
		g := recs.Graph()
		if err := g.Apply(m); err != nil {
			return fmt.Errorf("space %s: %w", space, err)
		}
		nodes, edges := tx.Bucket(bNodes), tx.Bucket(bEdges)
		for _, n := range recs.Nodes {
			if _, ok := g.Nodes[n.ID]; !ok {
				if err := nodes.Delete(key(space, n.ID)); err != nil {
					return err
				}
			}
		}
		for _, e := range recs.Edges {
			if _, ok := g.Edges[e.Key]; !ok {
				if err := edges.Delete(edgeKey(space, e.Key)); err != nil {
					return err
				}
			}
		}
		for id, n := range g.Nodes {
			if err := put(nodes, key(space, id), n); err != nil {
				return err
			}
		}
		for k, e := range g.Edges {
			if err := put(edges, edgeKey(space, k), e); err != nil {
				return err
			}
		}
		return nil
	})
}

func records(tx *bbolt.Tx, space string) (reference.GraphRecords, error) {
	var r reference.GraphRecords
	err := scan(tx.Bucket(bNodes), prefix(space), func(_, v []byte) error {
		var n reference.Node
		err := json.Unmarshal(v, &n)
		r.Nodes = append(r.Nodes, n)
		return err
	})
	if err != nil {
		return r, err
	}
	err = scan(tx.Bucket(bEdges), prefix(space), func(_, v []byte) error {
		var e reference.Edge
		err := json.Unmarshal(v, &e)
		r.Edges = append(r.Edges, e)
		return err
	})
	return r, err
}

// ReadRecords implements reference.GraphWriter: every stored record.
func (w *Writer) ReadRecords(ctx context.Context, space string) (reference.GraphRecords, error) {
	var r reference.GraphRecords
	err := w.d.run(ctx, false, func(tx *bbolt.Tx) (err error) { r, err = records(tx, space); return })
	return r, err
}

// ReadGraph implements reference.GraphWriter.
func (w *Writer) ReadGraph(ctx context.Context, space string) (reference.Graph, error) {
	r, err := w.ReadRecords(ctx, space)
	if err != nil {
		return reference.Graph{}, err
	}
	return r.Graph(), nil
}

// ---------------------------------------------------------------------------
// LockProvider

// Locks is a reference.LockProvider: one lease record per document and a
// token counter that survives releases.
type Locks struct{ d *DB }

// TryAcquire implements reference.LockProvider.
func (p *Locks) TryAcquire(ctx context.Context, space, doc, holder string, now, ttl int64) (reference.Lease, bool, error) {
	if err := reference.CheckLease(space, doc, holder, ttl); err != nil {
		return reference.Lease{}, false, err
	}
	var out reference.Lease
	granted := false
	err := p.d.run(ctx, true, func(tx *bbolt.Tx) error {
		leases := tx.Bucket(bLeases)
		var cur reference.Lease
		has, err := get(leases, key(space, doc), &cur)
		if err != nil {
			return err
		}
		if has && now < cur.ExpiresAt {
			if cur.Holder != holder {
				out = cur
				return nil
			}
			cur.ExpiresAt = now + ttl
			out, granted = cur, true
			return put(leases, key(space, doc), cur)
		}
		tokens := tx.Bucket(bTokens)
		var last int64
		if _, err := get(tokens, key(space, doc), &last); err != nil {
			return err
		}
		out = reference.Lease{Space: space, DocumentID: doc, Holder: holder, Token: last + 1, ExpiresAt: now + ttl}
		granted = true
		if err := put(tokens, key(space, doc), last+1); err != nil {
			return err
		}
		return put(leases, key(space, doc), out)
	})
	return out, granted, err
}

// Renew implements reference.LockProvider.
func (p *Locks) Renew(ctx context.Context, l reference.Lease, now, ttl int64) (reference.Lease, error) {
	if err := reference.CheckLease(l.Space, l.DocumentID, l.Holder, ttl); err != nil {
		return reference.Lease{}, err
	}
	var out reference.Lease
	err := p.d.run(ctx, true, func(tx *bbolt.Tx) error {
		leases := tx.Bucket(bLeases)
		var cur reference.Lease
		has, err := get(leases, key(l.Space, l.DocumentID), &cur)
		switch {
		case err != nil:
			return err
		case !has || cur.Holder != l.Holder || cur.Token != l.Token:
			return reference.LeaseLost(l, "not held")
		case now >= cur.ExpiresAt:
			return reference.LeaseLost(l, fmt.Sprintf("expired at %d", cur.ExpiresAt))
		}
		cur.ExpiresAt = now + ttl
		out = cur
		return put(leases, key(l.Space, l.DocumentID), cur)
	})
	return out, err
}

// Release implements reference.LockProvider.
func (p *Locks) Release(ctx context.Context, l reference.Lease) error {
	if err := reference.CheckKey(l.Space, l.DocumentID); err != nil {
		return err
	}
	return p.d.run(ctx, true, func(tx *bbolt.Tx) error {
		leases := tx.Bucket(bLeases)
		var cur reference.Lease
		has, err := get(leases, key(l.Space, l.DocumentID), &cur)
		if err != nil {
			return err
		}
		if !has || cur.Holder != l.Holder || cur.Token != l.Token {
			return reference.LeaseLost(l, "not held")
		}
		return leases.Delete(key(l.Space, l.DocumentID))
	})
}
