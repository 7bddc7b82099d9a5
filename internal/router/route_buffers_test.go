package router

// Tests of a routed message's bytes: copies, RouteTo's reused buffer, RouteInPlace's aliasing, allocations.

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// TestRouteCopies checks the message owns its bytes: the replication code
// reuses its buffers once Route returns.
func TestRouteCopies(t *testing.T) {
	tests := []struct {
		name string
		cfg  func(*Config)
		row  []col
	}{
		{name: "raw payload", row: baseRow()},
		{name: "headers", cfg: func(c *Config) { c.AdditionalPlacement = "type:header,aggregatetype:header" }, row: baseRow()},
		{name: "envelope", cfg: func(c *Config) { c.AdditionalPlacement = "type:envelope,meta:envelope" },
			row: with(baseRow(), text("meta", oidJSONB, `{"m": 1}`))},
		{name: "bytea", row: with(baseRow(), text("payload", oidBytea, `\x0102`), text("aggregateid", oidBytea, `\x03`))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := editedPlan(t, tc.cfg, tc.row)
			want, err := p.Route(tuple(tc.row), commitTime)
			if err != nil {
				t.Fatal(err)
			}
			cols := tuple(tc.row)
			got, err := p.Route(cols, commitTime)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cols {
				for i := range c.Data {
					c.Data[i] = '#'
				}
			}
			if render(got, nil) != render(want, nil) {
				t.Errorf("message changed when the tuple buffers were overwritten:\n%s\nwant\n%s", render(got, nil), render(want, nil))
			}
			// Slices must not share capacity: appending to one must not clobber another.
			if got.Key != nil {
				_ = append(got.Key, '!', '!', '!', '!')
			}
			_ = append(got.Headers[0].Value, '!', '!', '!', '!')
			if render(got, nil) != render(want, nil) {
				t.Errorf("appending to a returned slice changed the message:\n%s", render(got, nil))
			}
		})
	}
}

func TestRouteAllocs(t *testing.T) {
	row := baseRow()
	p := mustPlan(t, DefaultConfig(), row)
	cols := tuple(row)
	if _, err := p.Route(cols, commitTime); err != nil {
		t.Fatal(err)
	}
	// One buffer for all bytes and one header slice.
	if n := testing.AllocsPerRun(100, func() { _, _ = p.Route(cols, commitTime) }); n > 2 {
		t.Errorf("Route allocates %v times per row, want at most 2", n)
	}
}

// An envelope is one allocation more (its value), whatever the length of
// the text columns it writes as JSON strings.
func TestRouteEnvelopeAllocs(t *testing.T) {
	row := with(baseRow(), text("payload", oidText, strings.Repeat("long text payload, ", 20)))
	p := editedPlan(t, func(c *Config) { c.AdditionalPlacement = "type:envelope" }, row)
	cols := tuple(row)
	if _, err := p.Route(cols, commitTime); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = p.Route(cols, commitTime) }); n > 3 {
		t.Errorf("Route with an envelope allocates %v times per row, want at most 3", n)
	}
}

// RouteTo reuses the caller's Message: no allocation when its Buf has room,
// one (the bytes) when the caller moved Buf away to keep the last message.
func TestRouteToAllocs(t *testing.T) {
	r, err := New(DefaultConfig(), DefaultConverters())
	if err != nil {
		t.Fatal(err)
	}
	plan, err := r.Bind(Relation{Namespace: "public", Name: "outbox", Columns: []Column{
		{Name: "id", TypeOID: 2950}, {Name: "aggregatetype", TypeOID: 25}, {Name: "aggregateid", TypeOID: 25},
		{Name: "type", TypeOID: 25}, {Name: "payload", TypeOID: 3802},
	}})
	if err != nil {
		t.Fatal(err)
	}
	text := func(s string) *pglogrepl.TupleDataColumn {
		return &pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeText, Length: uint32(len(s)), Data: []byte(s)}
	}
	cols := []*pglogrepl.TupleDataColumn{text("0b7e3c3a-8f1d-4c3e-9b0a-2d6f5e4c3b2a"), text("order"), text("o-1"), text("Created"), text(`{"a": 1}`)}
	var msg Message
	if err := plan.RouteTo(&msg, cols, time.Now()); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(1000, func() {
		if err := plan.RouteTo(&msg, cols, time.Now()); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("RouteTo reusing Buf: %v allocations per row, want 0", allocs)
	}
	if string(msg.Value) != `{"a": 1}` || string(msg.Key) != "o-1" || len(msg.Headers) != 1 {
		t.Errorf("message %+v", msg)
	}
	if allocs := testing.AllocsPerRun(1000, func() {
		msg.Buf = nil
		if err := plan.RouteTo(&msg, cols, time.Now()); err != nil {
			t.Fatal(err)
		}
	}); allocs != 1 {
		t.Errorf("RouteTo with Buf moved away: %v allocations per row, want 1", allocs)
	}

	// Bytes routed into a buffer that was moved away stay intact; a buffer
	// too small is replaced, never overrun.
	kept := msg
	kept.Headers = append([]Header(nil), msg.Headers...)
	msg.Buf = make([]byte, 0, 4)
	cols[2], cols[4] = text("o-2"), text(`{"b": 2}`)
	if err := plan.RouteTo(&msg, cols, time.Now()); err != nil {
		t.Fatal(err)
	}
	if string(kept.Value) != `{"a": 1}` || string(kept.Key) != "o-1" || string(kept.Headers[0].Value) != "0b7e3c3a-8f1d-4c3e-9b0a-2d6f5e4c3b2a" {
		t.Errorf("earlier message changed by the next RouteTo: %+v", kept)
	}
	if string(msg.Value) != `{"b": 2}` || string(msg.Key) != "o-2" || cap(msg.Buf) == 4 {
		t.Errorf("message %+v, Buf cap %d", msg, cap(msg.Buf))
	}
}

// RouteInPlace routes every golden case as Route does, leaving what needs no
// decoding where it is in the tuple, with no spare capacity to append into.
func TestRouteInPlace(t *testing.T) {
	for _, tc := range routeCases {
		t.Run(tc.name, func(t *testing.T) {
			p := editedPlan(t, tc.cfg, tc.row)
			want := render(p.Route(tuple(tc.row), commitTime))
			var m Message
			err := p.RouteInPlace(&m, tuple(tc.row), commitTime)
			if got := render(m, err); got != want {
				t.Errorf("RouteInPlace:\n%s\nRoute:\n%s", got, want)
			}
		})
	}

	row := with(baseRow(), text("sig", oidBytea, `\x0102`))
	cfg := DefaultConfig()
	cfg.AdditionalPlacement = "type:header,sig:header"
	p := mustPlan(t, cfg, row)
	cols := tuple(row)
	col := func(name string) []byte {
		for i, c := range row {
			if c.name == name {
				return cols[i].Data
			}
		}
		t.Fatalf("no column %q", name)
		return nil
	}
	var m Message
	if err := p.RouteInPlace(&m, cols, commitTime); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what   string
		got    []byte
		column string
		alias  bool
	}{
		{"key", m.Key, "aggregateid", true},
		{"value", m.Value, "payload", true},
		{"id header", m.Headers[0].Value, "id", true},
		{"type header", m.Headers[1].Value, "type", true},
		{"bytea header", m.Headers[2].Value, "sig", false},
	} {
		src := col(c.column)
		if aliased := &c.got[0] == &src[0]; aliased != c.alias {
			t.Errorf("%s points into the tuple: %v, want %v", c.what, aliased, c.alias)
		}
		if c.alias && cap(c.got) != len(c.got) {
			t.Errorf("%s has %d bytes of spare capacity into the tuple", c.what, cap(c.got)-len(c.got))
		}
	}
}
