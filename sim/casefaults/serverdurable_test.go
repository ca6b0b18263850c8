package casefaults

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults/lazyfs/cut"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// fakeServer records what a server's durable-step kill did to it, in order.
type fakeServer struct {
	mu   sync.Mutex
	did  []string
	loss cut.Loss
}

func (f *fakeServer) note(s string)                                  { f.mu.Lock(); f.did = append(f.did, s); f.mu.Unlock() }
func (f *fakeServer) WatchDurable(string, func(cut.DurableOp)) error { return nil }
func (f *fakeServer) KillServer(context.Context, string) error       { f.note("kill"); return nil }
func (f *fakeServer) StartServer(context.Context, string) (time.Duration, error) {
	f.note("start")
	return time.Millisecond, nil
}
func (f *fakeServer) PowerOffServer(string) error { f.note("power off"); return nil }
func (f *fakeServer) CutServer(_ string, t cut.Tear) (cut.Loss, error) {
	f.note("cut")
	l := f.loss
	l.Torn = t.Unit > 0
	return l, nil
}

// A server's power cut at its step goes in this order: the power off at
// the instant (before the process that synced is killed), the server
// killed, what it had not synced thrown away, then its start; the note
// says what was lost. A torn cut that kept nothing is not exercised.
func TestServerPowerCutAtItsStep(t *testing.T) {
	for _, tc := range []struct {
		tear cut.Tear
		loss cut.Loss
		why  verdict.Cause
	}{
		{cut.Tear{}, cut.Loss{Bytes: 8192, Names: 2}, ""},
		{cut.Tear{Unit: cut.SectorSize}, cut.Loss{Bytes: 8192, Changes: 4, Kept: 2, Unit: cut.SectorSize}, ""},
		{cut.Tear{Unit: cut.SectorSize}, cut.Loss{Bytes: 8192, Unit: cut.SectorSize}, verdict.CauseNothingToTear},
	} {
		victim := exec.Command("sleep", "60")
		if err := victim.Start(); err != nil {
			t.Fatal(err)
		}
		fs := &fakeServer{loss: tc.loss}
		s := &serverWatch{ctx: context.Background(), sd: fs, name: "postgres", done: make(chan struct{}), power: true, tear: tc.tear}
		s.crash(cut.DurableOp{Pid: uint32(victim.Process.Pid), Op: "fdatasync", Path: "data/pg_wal/1"})
		note, why := s.judge("fault", "fdatasync data/pg_wal/1", 6)
		if err := victim.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Errorf("the process that synced: %v, want killed", err)
		}
		if got := strings.Join(fs.did, ", "); got != "power off, kill, cut, start" {
			t.Errorf("order: %s", got)
		}
		if !strings.HasPrefix(note, "durable-step power loss: server postgres SIGKILLed and the power of its data mount cut right after fdatasync data/pg_wal/1, its durable step during worker fault's store call 6; 8192 bytes") {
			t.Errorf("note: %s", note)
		}
		if (why == nil) != (tc.why == "") || why != nil && why.Cause != tc.why {
			t.Errorf("tear %+v loss %+v: not exercised %+v, want %q", tc.tear, tc.loss, why, tc.why)
		}
	}
}
