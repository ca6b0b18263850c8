package properties

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/memory"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The checkpoint store: an operation store that makes each write call
// durable in a journal (a line appended and fsynced before the call
// returns), and after each write rewrites in place, without an fsync, a
// checkpoint that a process reads instead of the journal's head: a
// 512-byte header saying how many journal records the checkpoint holds,
// then those records. A reader takes the checkpoint's records, then the
// journal's from there on. A power loss that keeps or loses the
// checkpoint's rewrite whole leaves it as it was when last synced (its
// first, empty version), and the whole journal is read: nothing is lost.
// A torn one can keep the new header and lose sectors of the records
// after it. What the store does then is the defect, or not:
const (
	// ckptNoChecksum trusts the header: it takes the records it can parse
	// and skips as many journal records as the header says it holds.
	ckptNoChecksum = "checkpoint-without-checksum"
)

// ckptHeader is the size of the checkpoint's header: one disk sector.
const ckptHeader = 512

// ckptRecord is one write call that changed the store.
type ckptRecord struct {
	Do     string              `json:"do"`
	Op     reference.Operation `json:"op"`
	Next   reference.Operation `json:"next,omitzero"`
	Plan   *reference.Plan     `json:"plan,omitempty"`
	Holder string              `json:"holder,omitempty"`
	Now    int64               `json:"now,omitempty"`
	TTL    int64               `json:"ttl,omitempty"`
}

// ckptOps is that store. Every call locks the folder's lock file and
// reads the state again (journal and checkpoint are shared by the case's
// processes); the state is the replay of the records on an in-memory
// operation store.
type ckptOps struct {
	dir, defect string
}

func (s *ckptOps) path(name string) string { return filepath.Join(s.dir, name) }

// syncDir makes the names in the store's folder durable.
func (s *ckptOps) syncDir() error {
	d, err := os.Open(s.dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// mkdir makes the store's folder, durable, unless it exists.
func (s *ckptOps) mkdir() error {
	if _, err := os.Stat(s.dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(s.dir))
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// create makes name with content and fsyncs it and the folder, unless it
// exists.
func (s *ckptOps) create(name string, content []byte) error {
	f, err := os.OpenFile(s.path(name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = f.Write(content)
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		return err
	}
	return s.syncDir()
}

// header is the checkpoint's header for its records body.
func (s *ckptOps) header(records int, body []byte) []byte {
	h := fmt.Sprintf("checkpoint records=%d", records)
	if s.defect != ckptNoChecksum {
		h += fmt.Sprintf(" bytes=%d crc=%08x", len(body), crc32.ChecksumIEEE(body))
	}
	return append([]byte(h+"\n"), bytes.Repeat([]byte{' '}, ckptHeader-len(h)-1)...)
}

// locked runs fn on the store's state, the folder locked.
func (s *ckptOps) locked(fn func(st *memory.OperationStore, recs []ckptRecord) error) error {
	if err := s.mkdir(); err != nil {
		return err
	}
	l, err := os.OpenFile(s.path("ops.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := syscall.Flock(int(l.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	if err := s.create("ops.journal", nil); err != nil {
		return err
	}
	if err := s.create("ops.checkpoint", s.header(0, nil)); err != nil {
		return err
	}
	recs, err := s.load()
	if err != nil {
		return err
	}
	st := memory.NewOperationStore()
	for _, r := range recs {
		if _, err := r.apply(context.Background(), st); err != nil {
			return fmt.Errorf("replaying %s of %s: %w", r.Do, r.Op.OperationID, err)
		}
	}
	return fn(st, recs)
}

// lines parses the JSON records of b, one a line, up to the first that
// does not parse.
func lines(b []byte) ([]ckptRecord, bool) {
	var out []ckptRecord
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r ckptRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return out, false
		}
		out = append(out, r)
	}
	return out, sc.Err() == nil
}

// load reads the records: the checkpoint's, then the journal's past them.
func (s *ckptOps) load() ([]ckptRecord, error) {
	journal, err := os.ReadFile(s.path("ops.journal"))
	if err != nil {
		return nil, err
	}
	all, ok := lines(journal)
	if !ok {
		return nil, errors.New("the journal does not parse")
	}
	ck, err := os.ReadFile(s.path("ops.checkpoint"))
	if err != nil {
		return nil, err
	}
	head, body := ck[:min(len(ck), ckptHeader)], ck[min(len(ck), ckptHeader):]
	var n, size int
	var sum uint32
	if s.defect == ckptNoChecksum {
		if _, err := fmt.Sscanf(string(head), "checkpoint records=%d", &n); err != nil {
			return all, nil // no header: the journal alone
		}
		recs, _ := lines(body) // trusted as far as it parses
		if n > len(all) {
			return nil, fmt.Errorf("the checkpoint holds %d records, the journal %d", n, len(all))
		}
		return append(recs, all[n:]...), nil
	}
	if _, err := fmt.Sscanf(string(head), "checkpoint records=%d bytes=%d crc=%x", &n, &size, &sum); err != nil ||
		size > len(body) || crc32.ChecksumIEEE(body[:size]) != sum {
		return all, nil // torn or never written: the journal alone
	}
	recs, ok := lines(body[:size])
	if !ok || len(recs) != n || n > len(all) {
		return all, nil
	}
	return append(recs, all[n:]...), nil
}

// wrote makes r durable in the journal, then rewrites the checkpoint in
// place with every record, unsynced.
func (s *ckptOps) wrote(recs []ckptRecord, r ckptRecord) error {
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(s.path("ops.journal"), os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(line, '\n'))
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		return err
	}
	var body bytes.Buffer
	for _, x := range append(recs, r) {
		b, err := json.Marshal(x)
		if err != nil {
			return err
		}
		body.Write(append(b, '\n'))
	}
	ck, err := os.OpenFile(s.path("ops.checkpoint"), os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = ck.WriteAt(append(s.header(len(recs)+1, body.Bytes()), body.Bytes()...), 0)
	return errors.Join(err, ck.Close()) // no fsync: the journal is durable
}

// apply runs r on st; ok says whether it changed st.
func (r ckptRecord) apply(ctx context.Context, st *memory.OperationStore) (bool, error) {
	switch r.Do {
	case "create":
		return st.CreateIfAbsent(ctx, r.Op, *r.Plan)
	case "cas":
		return st.CompareAndSet(ctx, r.Op, r.Next)
	case "claim":
		return st.Claim(ctx, r.Op.OperationID, r.Holder, r.Now, r.TTL)
	case "release":
		return st.ReleaseClaim(ctx, r.Op.OperationID, r.Holder)
	}
	return false, fmt.Errorf("unknown record %q", r.Do)
}

// write runs the write call r; a call that changed the store is made
// durable before it returns.
func (s *ckptOps) write(ctx context.Context, r ckptRecord) (bool, error) {
	var ok bool
	err := s.locked(func(st *memory.OperationStore, recs []ckptRecord) error {
		var err error
		if ok, err = r.apply(ctx, st); err != nil || !ok {
			return err
		}
		return s.wrote(recs, r)
	})
	return ok && err == nil, err
}

func (s *ckptOps) CreateIfAbsent(ctx context.Context, op reference.Operation, p reference.Plan) (bool, error) {
	return s.write(ctx, ckptRecord{Do: "create", Op: op, Plan: &p})
}

func (s *ckptOps) CompareAndSet(ctx context.Context, expected, next reference.Operation) (bool, error) {
	return s.write(ctx, ckptRecord{Do: "cas", Op: expected, Next: next})
}

func (s *ckptOps) Claim(ctx context.Context, id, holder string, now, ttl int64) (bool, error) {
	return s.write(ctx, ckptRecord{Do: "claim", Op: reference.Operation{OperationID: id}, Holder: holder, Now: now, TTL: ttl})
}

func (s *ckptOps) ReleaseClaim(ctx context.Context, id, holder string) (bool, error) {
	return s.write(ctx, ckptRecord{Do: "release", Op: reference.Operation{OperationID: id}, Holder: holder})
}

// read runs a read call on the state.
func ckptRead[T any](s *ckptOps, fn func(st *memory.OperationStore) (T, error)) (T, error) {
	var out T
	err := s.locked(func(st *memory.OperationStore, _ []ckptRecord) error {
		var err error
		out, err = fn(st)
		return err
	})
	return out, err
}

func (s *ckptOps) Get(ctx context.Context, id string) (reference.Operation, error) {
	return ckptRead(s, func(st *memory.OperationStore) (reference.Operation, error) { return st.Get(ctx, id) })
}

func (s *ckptOps) GetPlan(ctx context.Context, id string) (reference.Plan, error) {
	return ckptRead(s, func(st *memory.OperationStore) (reference.Plan, error) { return st.GetPlan(ctx, id) })
}

func (s *ckptOps) List(ctx context.Context) ([]reference.Operation, error) {
	return ckptRead(s, func(st *memory.OperationStore) ([]reference.Operation, error) { return st.List(ctx) })
}

func (s *ckptOps) ListRecoverable(ctx context.Context, limit int) ([]reference.Operation, error) {
	return ckptRead(s, func(st *memory.OperationStore) ([]reference.Operation, error) { return st.ListRecoverable(ctx, limit) })
}

// ckptBackend is the reference SQLite stores with the operation store
// replaced by ckptOps, its defect named by the case's mutant.
func ckptBackend() sim.Backend {
	return sim.Backend{
		Name:     "checkpoint-ops",
		Embedded: true,
		Open: func(_ context.Context, env sim.CaseEnv) (reference.Stores, error) {
			st, err := sqliteIn(env.Dir)
			if err != nil {
				return reference.Stores{}, err
			}
			st.Ops = &ckptOps{dir: filepath.Join(env.Dir, "ops"), defect: env.Mutant}
			return st, nil
		},
	}
}

// The windows the torn-column proof runs at: after the operation is
// created, so that the checkpoint holds records when the power goes.
var ckptPoints = []faults.Point{faults.BeforeGraphWrite, faults.BeforeStateCommit, faults.BeforeStateCommitted, faults.BeforeCompleted}

// The torn-write column of the default embedded matrix has judging power
// of its own: a store that rewrites a checkpoint in place without a
// checksum and trusts its header certifies every other kind at these
// windows, the power loss that keeps or loses the rewrite whole
// included, and fails the default matrix (torn writes at 512-byte
// sectors), in its torn-write cases only (I9: an acknowledged operation
// is gone). The same store checking a checksum over the checkpoint, and
// reading the journal alone when it does not match, certifies the
// default matrix.
func TestDefaultTornColumnCatchesACheckpointWithoutChecksum(t *testing.T) {
	requireLazyFS(t)
	off := CertifyCrashSafety(t, ckptBackend(), CrashOptions{Points: ckptPoints, Kinds: append(slices.Clone(faults.Kinds), faults.PowerLoss), Mutant: ckptNoChecksum})
	if n := off.Counts[verdict.Pass]; n == 0 || slices.ContainsFunc(off.Results, func(r verdict.CaseResult) bool { return r.Case.Kind == faults.TornWrite }) {
		t.Fatalf("torn writes off: %d cases passed, counts %v", n, off.Counts)
	}
	rep := CertifyCrashSafety(t, ckptBackend(), CrashOptions{Points: ckptPoints, Mutant: ckptNoChecksum, ExpectBroken: []string{"I9"}})
	torn := 0
	for _, r := range rep.Results {
		if r.Verdict == verdict.Pass || r.Verdict == verdict.NotApplicable {
			continue
		}
		if r.Case.Kind != faults.TornWrite {
			t.Errorf("%s: %s %v: only torn-write cases may fail", r.Case.ID, r.Verdict, r.Broken())
			continue
		}
		torn++
		logI9(t, r)
	}
	if torn == 0 {
		t.Fatalf("no torn-write case failed: counts %v", rep.Counts)
	}
	t.Logf("the default matrix at %d windows: %d torn-write cases of %d failed, counts %v", len(ckptPoints), torn, len(rep.Results), rep.Counts)
	good := CertifyCrashSafety(t, ckptBackend(), CrashOptions{Points: ckptPoints})
	tornRun := slices.ContainsFunc(good.Results, func(r verdict.CaseResult) bool {
		return r.Case.Kind == faults.TornWrite && r.Verdict == verdict.Pass
	})
	if good.ExitCode != 0 || !tornRun {
		t.Fatalf("the store checking its checkpoint's checksum: exit %d, counts %v, a torn-write case passed: %v", good.ExitCode, good.Counts, tornRun)
	}
}
