package sqlcore

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/reference"
)

func TestDialectSQL(t *testing.T) {
	q := `UPDATE {leases} SET a = ? WHERE b = ? AND c <> '' AND d IN (?, ?)`
	if got := (Dialect{}).SQL(q); got != `UPDATE leases SET a = ? WHERE b = ? AND c <> '' AND d IN (?, ?)` {
		t.Errorf("SQLite: %s", got)
	}
	pg := Dialect{Prefix: "cm_", Numbered: true, Text: "text", Key: `text COLLATE "C"`, Int: "bigint", Bytes: "bytea"}
	if got := pg.SQL(q); got != `UPDATE cm_leases SET a = $1 WHERE b = $2 AND c <> '' AND d IN ($3, $4)` {
		t.Errorf("PostgreSQL: %s", got)
	}
	if got := pg.DDL(`CREATE TABLE {t} (a <text>, b <key>, c <int>, d <bytes>)`); got != `CREATE TABLE cm_t (a text, b text COLLATE "C", c bigint, d bytea)` {
		t.Errorf("DDL: %s", got)
	}
	for _, stmt := range StatesTables(pg) {
		if strings.ContainsAny(stmt, "<>{}") {
			t.Errorf("unreplaced token in %s", stmt)
		}
	}
}

func TestBindNames(t *testing.T) {
	regs := []reference.EntityRegistration{
		{NodeID: "n2", Type: "Person", CanonicalName: "Bob", Aliases: []string{"ROBERT"}},
		{NodeID: "n1", Type: "person", CanonicalName: "Alice"},
		{NodeID: "n2", Type: "person", CanonicalName: "bob"},
	}
	keys, batch, err := BindNames("s", regs)
	if err != nil {
		t.Fatal(err)
	}
	want := []NameKey{{"person", "alice"}, {"person", "bob"}, {"person", "robert"}}
	if !reflect.DeepEqual(keys, want) || batch[NameKey{"person", "bob"}] != "n2" || batch[NameKey{"person", "alice"}] != "n1" {
		t.Fatalf("keys %v batch %v", keys, batch)
	}
	regs = append(regs, reference.EntityRegistration{NodeID: "n3", Type: "person", CanonicalName: "Robert"})
	if _, _, err := BindNames("s", regs); !errors.Is(err, reference.ErrRegistryConflict) || !strings.Contains(err.Error(), "n2 and n3") {
		t.Fatalf("a name bound twice in one batch: %v", err)
	}
	if _, _, err := BindNames(" ", nil); !errors.Is(err, reference.ErrInvalidArgument) {
		t.Fatalf("blank space: %v", err)
	}
	if err := BoundElsewhere("s", NameKey{"person", "bob"}, "n9", "n2"); !errors.Is(err, reference.ErrRegistryConflict) || !strings.Contains(err.Error(), "bound to n9, not n2") {
		t.Fatalf("BoundElsewhere = %v", err)
	}
}

func TestMatchKeys(t *testing.T) {
	keys, out := MatchKeys([]reference.EntityQuery{{Type: "Person", Names: []string{"Bob", "bob ", ""}}, {Type: "org"}, {Type: "org", Names: []string{"ACME"}}})
	want := []MatchKey{{0, "person", "bob"}, {2, "org", "acme"}}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
	if len(out) != 3 || out[1] == nil || len(out[1]) != 0 {
		t.Errorf("answers %#v: want one empty, non-nil list per query", out)
	}
}
