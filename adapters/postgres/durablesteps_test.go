package postgres

import (
	"context"
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/storetest"
	"github.com/jackc/pgx/v5"
)

// Why the PostgreSQL adapter declares no store windows: no method of its
// stores (System A's and System B's) takes two durable steps, counted as
// the transaction ids a call consumes on a private server (each write
// transaction takes one; reads take none).
func TestNoStoreMethodTakesTwoDurableSteps(t *testing.T) {
	ctx := context.Background()
	dsn := schemaDSN(t)
	st := openDSN(t, dsn, false)
	ps, err := OpenPlanSave(ctx, dsn, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	conn, err := pgx.Connect(ctx, serverDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	commits := func() int {
		var next int64
		if err := conn.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&next); err != nil {
			t.Fatal(err)
		}
		return int(next)
	}
	storetest.DurableSteps(t, st, ps, ps, commits)
}
