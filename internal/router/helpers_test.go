package router

import (
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pglogrepl"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/router")

// goldenDir holds this package's golden files (repository-level testdata).
var goldenDir = filepath.Join("..", "..", "testdata", "router")

// Type OIDs used only by tests.
const (
	oidVarchar     = 1043
	oidUUID        = 2950
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidDate        = 1082
)

// col is one column of a test row: its relation entry and its tuple value.
type col struct {
	name string
	oid  uint32
	dt   byte // pgoutput DataType; 0 means 't', or 'n' when null
	null bool
	val  string
	// notNull marks the column NOT NULL in the relation (Connect schemas
	// are optional otherwise).
	notNull bool
	// deflt is the column's DEFAULT expression as pg_get_expr prints it
	// ("" for none).
	deflt string
}

func text(name string, oid uint32, v string) col { return col{name: name, oid: oid, val: v} }
func null(name string, oid uint32) col           { return col{name: name, oid: oid, null: true} }

// commitTime is the commit time every routing test uses.
var commitTime = time.Date(2026, 11, 21, 9, 30, 0, 123456000, time.UTC)

// baseRow is a Debezium-style outbox row with the default column names.
func baseRow() []col {
	return []col{
		text("id", oidUUID, "5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"),
		text("aggregatetype", oidVarchar, "order"),
		text("aggregateid", oidVarchar, "A-1"),
		text("type", oidVarchar, "OrderCreated"),
		text("payload", oidJSONB, `{"orderId": "A-1", "total": 12.5}`),
	}
}

// with returns row with the named columns replaced (or appended when new).
func with(row []col, cs ...col) []col {
	out := append([]col(nil), row...)
outer:
	for _, c := range cs {
		for i := range out {
			if out[i].name == c.name {
				out[i] = c
				continue outer
			}
		}
		out = append(out, c)
	}
	return out
}

// without returns row minus the named columns.
func without(row []col, names ...string) []col {
	var out []col
	for _, c := range row {
		drop := false
		for _, n := range names {
			drop = drop || c.name == n
		}
		if !drop {
			out = append(out, c)
		}
	}
	return out
}

// relation returns the Relation describing row.
func relation(row []col) Relation {
	rel := Relation{ID: 16384, Namespace: "public", Name: "outbox"}
	for _, c := range row {
		rel.Columns = append(rel.Columns, Column{Name: c.name, TypeOID: c.oid, TypeModifier: -1, NotNull: c.notNull,
			Default: c.deflt, HasDefault: c.deflt != ""})
	}
	return rel
}

// tuple returns row as pgoutput tuple columns, each in its own buffer.
func tuple(row []col) []*pglogrepl.TupleDataColumn {
	out := make([]*pglogrepl.TupleDataColumn, len(row))
	for i, c := range row {
		tc := &pglogrepl.TupleDataColumn{DataType: c.dt}
		if tc.DataType == 0 {
			tc.DataType = pglogrepl.TupleDataTypeText
			if c.null {
				tc.DataType = pglogrepl.TupleDataTypeNull
			}
		}
		if tc.DataType == pglogrepl.TupleDataTypeText || tc.DataType == pglogrepl.TupleDataTypeBinary {
			tc.Data = []byte(c.val)
			tc.Length = uint32(len(tc.Data))
		}
		out[i] = tc
	}
	return out
}

// mustPlan builds a Router from cfg and binds it to row's relation.
func mustPlan(t testing.TB, cfg Config, row []col) *Plan {
	t.Helper()
	return convPlan(t, cfg, DefaultConverters(), row)
}

// convPlan is mustPlan with converters.
func convPlan(t testing.TB, cfg Config, conv Converters, row []col) *Plan {
	t.Helper()
	r, err := New(cfg, conv)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	p, err := r.Bind(relation(row))
	if err != nil {
		t.Fatalf("Bind: %v", err)
	}
	return p
}

// editedPlan is mustPlan with DefaultConfig changed by edit (nil: kept).
func editedPlan(t testing.TB, edit func(*Config), row []col) *Plan {
	t.Helper()
	cfg := DefaultConfig()
	if edit != nil {
		edit(&cfg)
	}
	return mustPlan(t, cfg, row)
}

// render prints a Route result readably, for golden files.
func render(m Message, err error) string {
	var b strings.Builder
	if err != nil {
		class, ok := ClassOf(err)
		if !ok {
			fmt.Fprintf(&b, "error class: <none>\n")
		} else {
			fmt.Fprintf(&b, "error class: %s\n", class)
		}
		fmt.Fprintf(&b, "error: %v\n", err)
		return b.String()
	}
	fmt.Fprintf(&b, "topic: %s\n", m.Topic)
	fmt.Fprintf(&b, "key: %s\n", quoteBytes(m.Key))
	for _, h := range m.Headers {
		fmt.Fprintf(&b, "header %q: %s\n", h.Key, quoteBytes(h.Value))
	}
	fmt.Fprintf(&b, "timestamp: %s\n", m.Timestamp.UTC().Format(time.RFC3339Nano))
	if m.HasPartition {
		fmt.Fprintf(&b, "partition: %d\n", m.Partition)
	} else {
		fmt.Fprintf(&b, "partition: <producer's choice>\n")
	}
	fmt.Fprintf(&b, "value: %s\n", quoteBytes(m.Value))
	return b.String()
}

// quoteBytes renders nil as <null>, UTF-8 as a quoted string and other
// bytes as hex.
func quoteBytes(b []byte) string {
	switch {
	case b == nil:
		return "<null>"
	case !utf8.Valid(b):
		return "hex " + hex.EncodeToString(b)
	}
	return fmt.Sprintf("%q", b)
}

// checkGolden compares got with testdata/router/<name>.golden, or rewrites it
// under -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(goldenDir, name+".golden")
	if *update {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test ./internal/router -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (rerun with -update if the change is intended)\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// nn marks c NOT NULL.
func nn(c col) col { c.notNull = true; return c }

// def gives c a DEFAULT expression.
func def(c col, expr string) col { c.deflt = expr; return c }
