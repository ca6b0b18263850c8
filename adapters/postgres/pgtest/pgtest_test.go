package pgtest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func ping(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var one int
	return conn.QueryRow(ctx, `SELECT 1`).Scan(&one)
}

func TestStartAndSchema(t *testing.T) {
	dsn := Start(t)
	ctx := context.Background()
	if err := ping(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	if os.Getenv(EnvDSN) == "" && !strings.Contains(dsn, "@127.0.0.1:") {
		t.Fatalf("server not on 127.0.0.1: %s", dsn)
	}
	sdsn := Schema(t, dsn)
	conn, err := pgx.Connect(ctx, sdsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var schema string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(schema, "t_") {
		t.Fatalf("current_schema = %q", schema)
	}
}

// TestWatchdog: a test binary that exits without calling stop does not
// leave its server running.
func TestWatchdog(t *testing.T) {
	if os.Getenv("PGTEST_CHILD") == "1" {
		dsn, _, err := StartServer()
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(2)
		}
		fmt.Println("DSN", dsn)
		os.Exit(0) // no stop()
	}
	if os.Getenv(EnvDSN) != "" {
		t.Log("an external server is not started, so there is nothing to watch")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWatchdog$")
	cmd.Env = append(os.Environ(), "PGTEST_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var dsn string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "DSN "); ok {
			dsn = d
		}
	}
	if dsn == "" {
		t.Fatalf("child printed no DSN:\n%s", out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := ping(ctx, dsn)
		cancel()
		if err != nil {
			return // stopped
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %s still up 30s after its test process exited", dsn)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A test server that a test SIGKILLs must leave nothing outside its
// cluster folder: its dynamic shared memory is a file in the data folder
// (mmap), not one in /dev/shm that outlives the run.
func TestServerKeepsSharedMemoryInItsFolder(t *testing.T) {
	if os.Getenv(EnvDSN) != "" {
		t.Log("an external server is configured by its owner")
		return
	}
	dsn, stop, err := StartServer()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var kind string
	if err := conn.QueryRow(ctx, `SHOW dynamic_shared_memory_type`).Scan(&kind); err != nil {
		t.Fatal(err)
	}
	if kind != "mmap" {
		t.Fatalf("dynamic_shared_memory_type = %s, want mmap", kind)
	}
}
