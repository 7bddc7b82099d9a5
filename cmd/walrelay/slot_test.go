package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/operator"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/testenv"
)

// slot list/inspect/create/drop/peek against one database, with each bad
// input the issue lists: unknown slot, bad name, a slot of another plugin
// or database, missing privilege, a slot in use, no --yes.
func TestSlotCommands(t *testing.T) {
	pg := testenv.Postgres(t)
	dsn := pg.NewDatabase(t)
	setupOutbox(t, dsn)
	env := childEnv("WALRELAY_POSTGRES_DSN=" + dsn)
	first := insertEvents(t, dsn, "order", "order")
	second := insertEvents(t, dsn, "customer")

	t.Run("list", func(t *testing.T) {
		out := wantOK(t, env, "slot", "list")
		if !regexp1(out, `(?m)^walrelay\s+pgoutput\s+`+dbName(t, dsn)+`\s+no\s+-\s+`) {
			t.Errorf("slot list has no row for walrelay:\n%s", out)
		}
		j := decodeJSON[struct{ Slots []postgres.Slot }](t, wantOK(t, env, "slot", "list", "-o", "json"))
		found := false
		for _, s := range j.Slots {
			if s.Name == "walrelay" {
				found = true
				if s.Plugin != "pgoutput" || s.Database != dbName(t, dsn) || s.Active || s.ConfirmedFlushLagBytes == nil || *s.ConfirmedFlushLagBytes <= 0 {
					t.Errorf("slot list -o json: walrelay = %+v", s)
				}
			}
		}
		if !found {
			t.Errorf("slot list -o json lacks walrelay:\n%+v", j)
		}
	})

	t.Run("inspect", func(t *testing.T) {
		out := wantOK(t, env, "slot", "inspect", "walrelay")
		for _, want := range []string{"plugin", "pgoutput", "confirmed_flush_lsn", "bytes", "behind", "wal_status", "reserved", "safe_wal_size", "unlimited", "temporary"} {
			if !strings.Contains(out, want) {
				t.Errorf("slot inspect lacks %q:\n%s", want, out)
			}
		}
		s := decodeJSON[postgres.Slot](t, wantOK(t, env, "slot", "inspect", "walrelay", "-o", "json"))
		if s.Name != "walrelay" || s.ConfirmedFlushLSN != slotLSN(t, dsn, "walrelay") || s.RestartLagBytes == nil {
			t.Errorf("slot inspect -o json = %+v", s)
		}
	})

	t.Run("peek does not consume", func(t *testing.T) {
		before := slotLSN(t, dsn, "walrelay")
		res := decodeJSON[operator.PeekResult](t, wantOK(t, env, "slot", "peek", "walrelay", "--limit", "2", "-o", "json"))
		if len(res.Events) != 2 || !res.More {
			t.Fatalf("peek --limit 2: %d events, more=%t, want 2 and more", len(res.Events), res.More)
		}
		for i, ev := range res.Events {
			if ev.ID != first[i] || ev.Topic != "outbox.event.order" || ev.Key == nil || *ev.Key != "agg-"+strconv.Itoa(i) || ev.PayloadBytes != len(`{"i": 0}`) || ev.ErrorClass != "" {
				t.Errorf("event %d = %+v, want id %s on outbox.event.order key agg-%d", i, ev, first[i], i)
			}
		}
		out := wantOK(t, env, "slot", "peek", "walrelay")
		for _, id := range append(first, second...) {
			if !strings.Contains(out, id) {
				t.Errorf("slot peek does not list %s:\n%s", id, out)
			}
		}
		if !strings.Contains(out, "outbox.event.customer") || !strings.Contains(out, "3 pending outbox event(s)") {
			t.Errorf("slot peek output:\n%s", out)
		}
		if after := slotLSN(t, dsn, "walrelay"); after != before {
			t.Errorf("peek moved confirmed_flush_lsn from %s to %s", before, after)
		}
		// The events are still there.
		res = decodeJSON[operator.PeekResult](t, wantOK(t, env, "slot", "peek", "walrelay", "-o", "json"))
		if len(res.Events) != 3 || res.More {
			t.Errorf("second peek: %d events (more=%t), want all 3", len(res.Events), res.More)
		}
	})

	t.Run("advance --to", func(t *testing.T) {
		res := decodeJSON[operator.PeekResult](t, wantOK(t, env, "slot", "peek", "walrelay", "-o", "json"))
		// To the first transaction's end: exactly its two events are skipped.
		to := res.Events[0].TxEndLSN
		plan := decodeJSON[operator.AdvancePlan](t, wantOK(t, env, "slot", "advance", "walrelay", "--to", to, "--yes", "-o", "json"))
		if len(plan.Skipped) != 2 || plan.Skipped[0].ID != first[0] || plan.Skipped[1].ID != first[1] || plan.To != to {
			t.Errorf("advance --to %s skipped %+v, want the 2 events of the first transaction", to, plan.Skipped)
		}
		if got := slotLSN(t, dsn, "walrelay"); got != to {
			t.Errorf("slot at %s after advance --to %s", got, to)
		}
		// To the second transaction's INSERT, before its commit: nothing
		// is skipped and the transaction stays pending.
		mid := res.Events[2].LSN
		out := wantOK(t, env, "slot", "advance", "walrelay", "--to", mid, "--yes")
		if !strings.Contains(out, "skips 0 outbox event(s)") || strings.Contains(out, second[0]) {
			t.Errorf("advance --to %s (inside the second transaction):\n%s", mid, out)
		}
		res = decodeJSON[operator.PeekResult](t, wantOK(t, env, "slot", "peek", "walrelay", "-o", "json"))
		if len(res.Events) != 1 || res.Events[0].ID != second[0] {
			t.Errorf("after advancing into the second transaction, peek shows %+v, want %s", res.Events, second[0])
		}
	})

	t.Run("create and drop", func(t *testing.T) {
		name := testenv.UniqueName(t, "s")
		out := wantOK(t, env, "slot", "create", name)
		if !strings.HasPrefix(out, "created slot "+name+" (pgoutput, database "+dbName(t, dsn)+") at ") {
			t.Errorf("slot create printed %q", out)
		}
		stdout, stderr, code := walrelay(t, env, "slot", "create", name)
		wantFailure(t, stdout, stderr, code, 1, "already exists", name)

		stdout, stderr, code = walrelay(t, env, "slot", "drop", name)
		wantFailure(t, stdout, stderr, code, 2, "--yes", "not a terminal")
		if !slotExists(t, dsn, name) {
			t.Fatal("slot drop without --yes dropped the slot")
		}
		out = wantOK(t, env, "slot", "drop", name, "--yes")
		if !strings.HasPrefix(out, "dropped slot "+name) || slotExists(t, dsn, name) {
			t.Errorf("slot drop --yes: %q; slot exists: %t", out, slotExists(t, dsn, name))
		}
	})

	t.Run("bad input", func(t *testing.T) {
		td := testenv.UniqueName(t, "td")
		testenv.Exec(t, dsn, `SELECT pg_create_logical_replication_slot($1, 'test_decoding')`, td)
		otherDSN := pg.NewDatabase(t)
		other := testenv.UniqueName(t, "other")
		testenv.Exec(t, otherDSN, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, other)
		role := createRole(t, dsn)
		unprivileged := childEnv("WALRELAY_POSTGRES_DSN=" + withUser(t, dsn, role))
		for _, c := range []struct {
			name string
			env  []string
			args []string
			code int
			want []string
		}{
			{"unknown slot", env, []string{"slot", "inspect", "nope"}, 1, []string{`replication slot does not exist: "nope"`, "walrelay slot list", "walrelay slot create nope"}},
			{"unknown slot peek", env, []string{"slot", "peek", "nope"}, 1, []string{`replication slot does not exist: "nope"`}},
			{"unknown slot drop", env, []string{"slot", "drop", "nope", "--yes"}, 1, []string{`replication slot does not exist: "nope"`}},
			{"bad slot name", env, []string{"slot", "inspect", "Bad-Name"}, 2, []string{`slot name "Bad-Name"`, "lowercase letters, digits and underscores"}},
			{"injection attempt", env, []string{"slot", "peek", "x'); DROP TABLE outbox; --"}, 2, []string{"slot name"}},
			{"other plugin peek", env, []string{"slot", "peek", td}, 1, []string{`uses plugin "test_decoding"`, "walrelay reads only pgoutput slots"}},
			{"other plugin advance", env, []string{"slot", "advance", td, "--to", "0/1", "--yes"}, 1, []string{`uses plugin "test_decoding"`}},
			{"other database peek", env, []string{"slot", "peek", other}, 1, []string{"belongs to database " + strconv.Quote(dbName(t, otherDSN)), "connect to"}},
			{"other database drop", env, []string{"slot", "drop", other, "--yes"}, 1, []string{"belongs to database"}},
			{"missing privilege peek", unprivileged, []string{"slot", "peek", "walrelay"}, 1, []string{"permission denied", "REPLICATION", `ALTER ROLE "` + role + `" REPLICATION`}},
			{"missing privilege create", unprivileged, []string{"slot", "create", "never"}, 1, []string{"permission denied", `ALTER ROLE "` + role + `" REPLICATION`}},
			{"unknown subcommand", env, []string{"slot", "frob"}, 2, []string{"frob"}},
			{"no subcommand", env, []string{"slot"}, 2, []string{"needs a subcommand"}},
			{"missing argument", env, []string{"slot", "inspect"}, 2, []string{"1 arg"}},
			{"bad limit", env, []string{"slot", "peek", "walrelay", "--limit", "0"}, 2, []string{"--limit 0"}},
			{"server unreachable", childEnv("WALRELAY_POSTGRES_DSN=" + withPassword(t, dsn, "pw", closedPort(t))), []string{"slot", "list"}, 1, []string{"cannot reach postgres at 127.0.0.1:"}},
			{"no such database", childEnv("WALRELAY_POSTGRES_DSN=" + strings.Replace(dsn, dbName(t, dsn), "nosuchdb", 1)), []string{"slot", "list"}, 1, []string{`database "nosuchdb" does not exist`}},
		} {
			t.Run(c.name, func(t *testing.T) {
				stdout, stderr, code := walrelay(t, c.env, c.args...)
				wantFailure(t, stdout, stderr, code, c.code, c.want...)
			})
		}
		if !slotExists(t, otherDSN, other) || !slotExists(t, dsn, td) {
			t.Error("a refused drop dropped the slot")
		}
		// inspect shows a foreign slot, saying why walrelay cannot use it.
		out := wantOK(t, env, "slot", "inspect", td)
		if !strings.Contains(out, "test_decoding") || !strings.Contains(out, "note") {
			t.Errorf("slot inspect of a test_decoding slot:\n%s", out)
		}
	})

	t.Run("in use", func(t *testing.T) {
		pid, _ := holdSlot(t, dsn, "walrelay")
		inUse := "slot \"walrelay\" is in use by pid " + strconv.Itoa(int(pid))
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"slot", "peek", "walrelay"}, "stop the relay or peek a copy"},
			{[]string{"slot", "advance", "walrelay", "--to", "0/1", "--yes"}, "stop the relay"},
			{[]string{"slot", "drop", "walrelay", "--yes"}, "--force"},
		} {
			stdout, stderr, code := walrelay(t, env, c.args...)
			wantFailure(t, stdout, stderr, code, 1, inUse, c.want)
		}
		// A copy can be peeked while the slot is held.
		res := decodeJSON[operator.PeekResult](t, wantOK(t, env, "slot", "peek", "walrelay", "--copy", "-o", "json"))
		if len(res.Events) != 1 || res.Copy == "" {
			t.Errorf("peek --copy: %d events, copy %q", len(res.Events), res.Copy)
		}
		out := wantOK(t, env, "slot", "drop", "walrelay", "--force", "--yes")
		if !strings.HasPrefix(out, "dropped slot walrelay") || slotExists(t, dsn, "walrelay") {
			t.Errorf("slot drop --force: %q, exists %t", out, slotExists(t, dsn, "walrelay"))
		}
	})
}

func regexp1(s, pattern string) bool {
	return regexp.MustCompile(pattern).MatchString(s)
}
