package neo4j

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/neo4j/neo4jtest"
)

// server is the one Neo4j server shared by every test of the package;
// tests isolate themselves by space (see testSpace).
var server *neo4jtest.Server

func TestMain(m *testing.M) {
	t0 := time.Now()
	srv, err := neo4jtest.StartServer(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	if srv.Container != nil {
		fmt.Fprintf(os.Stderr, "neo4jtest: container ready at %s: engine+image check %s, Run took %s, Run to first query %s (total %s)\n",
			srv.URI, srv.Preflight.Round(time.Millisecond),
			srv.RunTook.Round(time.Millisecond), srv.Ready.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	}
	server = srv
	code := m.Run()
	srv.Stop()
	os.Exit(code)
}

var spaceSeq atomic.Int64

// runID distinguishes the spaces of this test binary from those of earlier
// runs against the same (external) server.
var runID = func() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

// testSpace returns a space name no other test (or run) uses.
func testSpace(t testing.TB) string {
	return fmt.Sprintf("%s/%s/%d", runID, t.Name(), spaceSeq.Add(1))
}

// openWriter opens a writer on the shared server, closed when t ends.
func openWriter(t testing.TB, opts Options) *Writer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := Open(ctx, server.URI, server.User, server.Password, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", server.URI, err)
	}
	t.Cleanup(func() {
		if err := w.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return w
}
