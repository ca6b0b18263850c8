package provision

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/sim/servers/serverfaults"
)

// A kill command that does nothing, on a server that answers late (a
// loaded machine): a readiness query that runs out of time is no evidence
// that the server is gone, so the kill is refused, never taken for a
// crash. A query that fails (connection refused) is a server gone.
func TestKillCommandNeedsTheServerGoneNotSlow(t *testing.T) {
	defer func(g, p time.Duration) { killGone, killPing = g, p }(killGone, killPing)
	killGone, killPing = 300*time.Millisecond, 20*time.Millisecond
	slow := func(ctx context.Context, addr string) error {
		<-ctx.Done() // alive, but slower than the query's bound
		return ctx.Err()
	}
	s := &serverfaults.Server{Name: "postgres", Addr: "127.0.0.1:1"}
	commandServer(s, "true", "true", slow, io.Discard)
	err := s.Kill(context.Background())
	if err == nil || !strings.Contains(err.Error(), `--postgres-kill "true" returned but postgres`) {
		t.Fatalf("a server that only answered late was taken for killed: %v", err)
	}
	refused := func(ctx context.Context, addr string) error {
		return errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	}
	s = &serverfaults.Server{Name: "postgres", Addr: "127.0.0.1:1"}
	commandServer(s, "true", "true", refused, io.Discard)
	if err := s.Kill(context.Background()); err != nil {
		t.Fatalf("a server that refuses connections after its kill: %v", err)
	}
}
