package testenv_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/testenv"
)

func TestParseLSN(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     pglogrepl.LSN
		fails    bool
	}{
		{name: "zero", in: "0/0", want: 0},
		{name: "typical", in: "16/B374D848", want: 0x16_B374D848},
		{name: "no slash", in: "16B374D848", fails: true},
		{name: "empty", in: "", fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ftb := &fakeTB{TB: t}
			got := testenv.ParseLSN(ftb, tc.in)
			if tc.fails {
				if ftb.fatal == "" {
					t.Fatalf("ParseLSN(%q) = %s, did not fail the test", tc.in, got)
				}
				return
			}
			if ftb.fatal != "" || got != tc.want {
				t.Errorf("ParseLSN(%q) = %s (failure %q), want %s", tc.in, got, ftb.fatal, tc.want)
			}
		})
	}
}

func TestSlotHelpers(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	testenv.Exec(t, dsn, `SELECT pg_create_logical_replication_slot('probe', 'pgoutput')`)
	start, _ := testenv.SlotLSNs(t, dsn, "probe")
	testenv.Exec(t, dsn, `CREATE TABLE t (v int); INSERT INTO t SELECT generate_series(1, 100)`)
	confirmed, target := testenv.SlotLSNs(t, dsn, "probe")
	if confirmed != start || target <= start {
		t.Fatalf("after writing WAL nobody read: confirmed %s (was %s), current %s; want confirmed unchanged and current past it", confirmed, start, target)
	}

	t.Run("times out", func(t *testing.T) {
		ftb := &fakeTB{TB: t}
		testenv.WaitConfirmed(ftb, dsn, "probe", target, 300*time.Millisecond)
		for _, want := range []string{"probe", "did not reach " + target.String(), confirmed.String()} {
			if !strings.Contains(ftb.fatal, want) {
				t.Errorf("failure %q lacks %q", ftb.fatal, want)
			}
		}
	})

	t.Run("missing slot fails at once", func(t *testing.T) {
		ftb := &fakeTB{TB: t}
		begin := time.Now()
		testenv.WaitConfirmed(ftb, dsn, "no_such_slot", target, time.Minute)
		if took := time.Since(begin); took > 10*time.Second {
			t.Errorf("WaitConfirmed on a missing slot took %s to fail", took)
		}
		if !strings.Contains(ftb.fatal, "no_such_slot does not exist") {
			t.Errorf("failure %q does not say the slot does not exist", ftb.fatal)
		}
		ftb.fatal = ""
		testenv.SlotLSNs(ftb, dsn, "no_such_slot")
		if !strings.Contains(ftb.fatal, "no_such_slot does not exist") {
			t.Errorf("SlotLSNs failure %q does not say the slot does not exist", ftb.fatal)
		}
	})

	t.Run("confirmed", func(t *testing.T) {
		testenv.Exec(t, dsn, `SELECT pg_replication_slot_advance('probe', $1::text::pg_lsn)`, target.String())
		testenv.WaitConfirmed(t, dsn, "probe", target, 10*time.Second)
	})

	t.Run("caught up", func(t *testing.T) {
		testenv.Exec(t, dsn, `INSERT INTO t SELECT generate_series(1, 100)`)
		// Stand in for a relay: keep confirming whatever the server wrote.
		conn := testenv.Connect(t, dsn)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() {
			for ctx.Err() == nil {
				_, err := conn.Exec(ctx, `SELECT pg_replication_slot_advance('probe', pg_current_wal_lsn())`)
				if err != nil && ctx.Err() == nil {
					t.Errorf("advancing the slot: %v", err)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
		before := time.Now()
		waited := testenv.WaitCaughtUp(t, dsn, "probe", 10*time.Second)
		if around := time.Since(before); waited <= 0 || waited > around {
			t.Errorf("WaitCaughtUp returned %s; want how long it waited, more than 0 and at most the %s around the call", waited, around)
		}
		cancel()
		wg.Wait()
	})
}

func TestSyncBufferConcurrentWrites(t *testing.T) {
	var b testenv.SyncBuffer
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 100 {
				fmt.Fprintf(&b, "%d.%d\n", i, j)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 400 {
		t.Errorf("%d lines, want 400", n)
	}
}

func TestHeader(t *testing.T) {
	r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "id", Value: []byte("1")}, {Key: "id", Value: []byte("2")}, {Key: "empty"}}}
	for _, tc := range []struct{ key, want string }{
		{"id", "1"},
		{"empty", ""},
		{"absent", ""},
	} {
		if got := testenv.Header(r, tc.key); got != tc.want {
			t.Errorf("Header(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}
