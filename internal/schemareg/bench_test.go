package schemareg_test

import (
	"context"
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
