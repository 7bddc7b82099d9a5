package schemareg_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/schemareg"
	"github.com/walrelay/walrelay/internal/testenv"
)

// warmClient returns a client whose cache holds recA under "orders-value".
func warmClient(tb testing.TB) *schemareg.Client {
	reg := testenv.Registry(tb)
	c, err := schemareg.New(schemareg.Config{URLs: []string{reg.URL()}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	if _, err := c.ID(context.Background(), "orders-value", recA, autoRegister); err != nil {
		tb.Fatal(err)
	}
	return c
}

// TestIDCacheHitAllocatesNothing pins the hot path: a cached id costs no
// allocation (the relay asks for one per record).
func TestIDCacheHitAllocatesNothing(t *testing.T) {
	c := warmClient(t)
	ctx := context.Background()
	subject, schema := "orders-value", recA
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := c.ID(ctx, subject, schema, autoRegister); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a cache hit allocates %v times, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := c.Schema(ctx, subject, 1); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a cached Schema allocates %v times, want 0", n)
	}
}

func BenchmarkIDCacheHit(b *testing.B) {
	c := warmClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.ID(ctx, "orders-value", recA, autoRegister); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkSchemaLatestCacheHit(b *testing.B) {
	reg := testenv.Registry(b)
	reg.Register("s", recA)
	c, err := schemareg.New(schemareg.Config{URLs: []string{reg.URL()}, LatestTTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Schema(ctx, "s", 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Schema(ctx, "s", 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// longSchema is a record of 40 fields, about 5 KB of text.
func longSchema() string {
	var fields []string
	for i := range 40 {
		fields = append(fields, fmt.Sprintf(`{"name":"field_%02d","type":["null",{"type":"string","connect.version":1,"connect.name":"io.debezium.data.Json"}],"default":null}`, i))
	}
	return `{"type":"record","name":"Value","namespace":"test_server.public.outbox.order","fields":[` + strings.Join(fields, ",") + `],"connect.name":"test_server.public.outbox.order.Value"}`
}

// fpText is a schema text with a fingerprint, as internal/connect/avro's
// *Schema.
type fpText struct {
	text string
	fp   uint64
}

func (s *fpText) String() string      { return s.text }
func (s *fpText) Fingerprint() uint64 { return s.fp }

// BenchmarkIDCacheHitLongSchema: ID's cache key holds the schema's text, so
// a hit hashes and compares all of it.
func BenchmarkIDCacheHitLongSchema(b *testing.B) {
	reg := testenv.Registry(b)
	long := longSchema()
	c, err := schemareg.New(schemareg.Config{URLs: []string{reg.URL()}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.ID(ctx, "orders-value", long, autoRegister); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(long)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.ID(ctx, "orders-value", long, autoRegister); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIDOfCacheHitLongSchema: IDOf's hit is keyed by the fingerprint
// and compares the (same) string: independent of the schema's size.
func BenchmarkIDOfCacheHitLongSchema(b *testing.B) {
	reg := testenv.Registry(b)
	s := &fpText{longSchema(), 42}
	c, err := schemareg.New(schemareg.Config{URLs: []string{reg.URL()}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.IDOf(ctx, "orders-value", s, autoRegister); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.IDOf(ctx, "orders-value", s, autoRegister); err != nil {
			b.Fatal(err)
		}
	}
}

// TestIDOf: the fingerprint-keyed cache answers as ID does, allocates
// nothing on a hit, and a fingerprint shared by two texts never returns
// the other text's id.
func TestIDOf(t *testing.T) {
	reg := testenv.Registry(t)
	reg.SetCompat("s", "NONE")
	c, err := schemareg.New(schemareg.Config{URLs: []string{reg.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	a, b := &fpText{recA, 7}, &fpText{str, 7} // same fingerprint, different texts
	idA, err := c.IDOf(ctx, "s", a, autoRegister)
	if err != nil {
		t.Fatal(err)
	}
	idB, err := c.IDOf(ctx, "s", b, autoRegister)
	if err != nil || idB == idA {
		t.Fatalf("IDOf of another text with the same fingerprint = %d, %v; first %d", idB, err, idA)
	}
	for _, tc := range []struct {
		s    *fpText
		want int32
	}{{a, idA}, {b, idB}, {&fpText{recA, 8}, idA}} {
		if got, err := c.IDOf(ctx, "s", tc.s, autoRegister); err != nil || got != tc.want {
			t.Errorf("IDOf(%q, fp %d) = %d, %v; want %d", tc.s.text, tc.s.fp, got, err, tc.want)
		}
	}
	if n := reg.Count("POST", "/subjects/s/versions"); n != 2 {
		t.Errorf("registrations = %d, want 2", n)
	}
	if n := testing.AllocsPerRun(1000, func() { _, _ = c.IDOf(ctx, "s", a, autoRegister) }); n != 0 {
		t.Errorf("an IDOf hit allocates %v times, want 0", n)
	}
}
