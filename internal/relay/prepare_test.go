package relay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/relay"
	"github.com/walrelay/walrelay/internal/testenv"
)

// Run checks the database before streaming: a bad slot or publication
// fails at startup with an error that names it and says what to do; a
// missing slot is created when postgres.create_slot allows.
func TestStartupChecks(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, f *fixture)
		mutate  func(c *config.Config)
		want    error
		msg     string
	}{
		{"missing slot",
			func(t *testing.T, f *fixture) { dropUnusedSlot(t, f.dsn) },
			func(c *config.Config) { c.Postgres.CreateSlot = false }, relay.ErrSlotMissing, "postgres.create_slot=true"},
		{"slot of another plugin",
			func(t *testing.T, f *fixture) {
				testenv.Exec(t, f.dsn, `SELECT pg_drop_replication_slot('walrelay')`)
				testenv.Exec(t, f.dsn, `SELECT pg_create_logical_replication_slot('walrelay', 'test_decoding')`)
			},
			nil, relay.ErrSlotMismatch, `uses plugin "test_decoding"`},
		{"physical slot",
			func(t *testing.T, f *fixture) {
				testenv.Exec(t, f.dsn, `SELECT pg_drop_replication_slot('walrelay')`)
				testenv.Exec(t, f.dsn, `SELECT pg_create_physical_replication_slot('walrelay')`)
				// A physical slot is the cluster's, not the database's:
				// the database's cleanup leaves it.
				t.Cleanup(func() {
					conn, err := pgx.Connect(context.Background(), f.dsn)
					if err == nil {
						_, err = conn.Exec(context.Background(), `SELECT pg_drop_replication_slot('walrelay')`)
						_ = conn.Close(context.Background())
					}
					if err != nil {
						t.Errorf("dropping the physical slot: %v", err)
					}
				})
			},
			nil, relay.ErrSlotMismatch, "is a physical slot"},
		{"missing publication", nil,
			func(c *config.Config) { c.Postgres.Publications = []string{"walrelay_outbox", "nope"} },
			relay.ErrPublicationMissing, `["nope"]`},
		{"publication of all tables",
			func(t *testing.T, f *fixture) {
				testenv.Exec(t, f.dsn, `CREATE PUBLICATION all_tables FOR ALL TABLES`)
			},
			func(c *config.Config) { c.Postgres.Publications = []string{"all_tables"} },
			relay.ErrPublicationRecord, "CREATE PUBLICATION walrelay_outbox FOR TABLE public.outbox"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.mutate)
			if tc.prepare != nil {
				tc.prepare(t, f)
			}
			err := f.start(t).wait(30 * time.Second)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Run = %v, want %v saying %q", err, tc.want, tc.msg)
			}
		})
	}
	t.Run("missing slot created", func(t *testing.T) {
		f := newFixture(t, nil) // postgres.create_slot is on by default
		dropUnusedSlot(t, f.dsn)
		run := f.start(t)
		f.logs.waitLog(t, "created replication slot", nil, 30*time.Second)
		execTx(t, f.dsn, insertEvent("order", "o1"))
		f.broker.ReadAll(t, []string{"outbox.event.order"}, 1, 30*time.Second)
		if err := run.stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// AfterStartup's function runs once the startup checks passed, and never
// when they fail: walrelay run starts its partition maintainer with it, so
// a relay that cannot start reports one error, not the maintainer's too.
func TestAfterStartup(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*config.Config)
		start  bool
	}{
		{"checks pass", nil, true},
		{"checks fail", func(c *config.Config) { c.Postgres.Publications = []string{"nope"} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.mutate)
			started := make(chan struct{})
			r, err := relay.New(f.cfg, f.logs.logger(), nil, relay.AfterStartup(func() { close(started) }))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			select {
			case <-started:
				if !tc.start {
					t.Fatal("called although the startup checks failed")
				}
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run after a stop = %v", err)
				}
			case err := <-done:
				if tc.start {
					t.Fatalf("Run returned %v without calling AfterStartup's function", err)
				}
				if !errors.Is(err, relay.ErrPublicationMissing) {
					t.Errorf("Run = %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("neither started nor stopped in 30s")
			}
		})
	}
}
