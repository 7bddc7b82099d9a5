package main

import (
	"context"
	"encoding/json"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"
)

// Helpers for the operator subcommands' tests (check, slot, status, lsn).

// setupOutbox creates the outbox table, publication and slot walrelay in
// the database at dsn.
func setupOutbox(t *testing.T, dsn string) {
	t.Helper()
	if _, err := setup.Run(t.Context(), testenv.Connect(t, dsn), setup.Names{Schema: "public", Table: "outbox", Publication: "walrelay_outbox", Slot: "walrelay"}); err != nil {
		t.Fatal(err)
	}
}

// insertEvents commits one transaction with one outbox row per
// aggregatetype value in types ("" means NULL) and returns their ids.
func insertEvents(t *testing.T, dsn string, types ...string) []string {
	t.Helper()
	ctx := t.Context()
	conn := testenv.Connect(t, dsn)
	var ids []string
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for i, typ := range types {
			var at any = typ
			if typ == "" {
				at = nil
			}
			var id string
			if err := tx.QueryRow(ctx, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
				VALUES ($1, $2, 'Happened', jsonb_build_object('i', $3::int)) RETURNING id::text`, at, "agg-"+strconv.Itoa(i), i).Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("inserting outbox rows: %v", err)
	}
	return ids
}

// wantFailure asserts exit code want and one "walrelay: " line on stderr
// containing every substring, with no stack trace.
func wantFailure(t *testing.T, stdout, stderr string, code, want int, substrings ...string) {
	t.Helper()
	if code != want {
		t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, want, stdout, stderr)
	}
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "walrelay: ") {
		t.Errorf("want one stderr line starting with \"walrelay: \", got:\n%s", stderr)
	}
	for _, s := range substrings {
		if !strings.Contains(stderr, s) {
			t.Errorf("stderr does not contain %q:\n%s", s, stderr)
		}
	}
	noStackTrace(t, "stderr", stderr)
	noStackTrace(t, "stdout", stdout)
}

// wantOK asserts exit 0 with an empty stderr and returns stdout.
func wantOK(t *testing.T, env []string, args ...string) string {
	t.Helper()
	stdout, stderr, code := walrelay(t, env, args...)
	if code != 0 || stderr != "" {
		t.Fatalf("walrelay %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
	}
	return stdout
}

func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decoding JSON output: %v\n%s", err, s)
	}
	return v
}

// slotLSN returns the slot's confirmed_flush_lsn.
func slotLSN(t *testing.T, dsn, slot string) string {
	t.Helper()
	return testenv.QueryValue[string](t, dsn, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot)
}

func slotExists(t *testing.T, dsn, slot string) bool {
	t.Helper()
	return testenv.QueryValue[bool](t, dsn, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, slot)
}

// dbName returns the database of a URL DSN.
func dbName(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

// withUser returns the URL dsn with another user and no password.
func withUser(t *testing.T, dsn, user string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(user)
	return u.String()
}

// closedPort returns a TCP port on 127.0.0.1 nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return port
}

// createRole creates a login role with no privileges, dropped at cleanup.
func createRole(t *testing.T, dsn string) string {
	t.Helper()
	role := testenv.UniqueName(t, "r")
	testenv.Exec(t, dsn, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN")
	t.Cleanup(func() { dropRole(dsn, role) })
	return role
}

// holdSlot streams from slot on a replication connection, so the slot is
// active, until the returned function (or cleanup) closes it. It returns
// the walsender's pid.
func holdSlot(t *testing.T, dsn, slot string) (pid uint32, release func()) {
	t.Helper()
	ctx := t.Context()
	conn, err := pgconn.Connect(ctx, dsn+"&replication=database")
	if err != nil {
		t.Fatalf("replication connection: %v", err)
	}
	err = pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names 'walrelay_outbox'"},
	})
	if err != nil {
		t.Fatalf("starting replication: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !testenv.QueryValue[bool](t, dsn, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot) {
		if time.Now().After(deadline) {
			t.Fatal("slot never became active")
		}
		time.Sleep(20 * time.Millisecond)
	}
	done := false
	release = func() {
		if !done {
			done = true
			_ = conn.Close(context.Background())
		}
	}
	t.Cleanup(release)
	return conn.PID(), release
}

var lsnPattern = regexp.MustCompile(`^[0-9A-F]+/[0-9A-F]+$`)

// `walrelay lsn` prints the server's WAL position; `lsn diff` compares
// two LSNs offline, and a malformed one is bad usage.
func TestLSN(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	env := childEnv("WALRELAY_POSTGRES_DSN=" + dsn)
	if out := strings.TrimSpace(wantOK(t, env, "lsn")); !lsnPattern.MatchString(out) {
		t.Errorf("walrelay lsn printed %q, want an LSN", out)
	}
	j := decodeJSON[map[string]string](t, wantOK(t, env, "lsn", "-o", "json"))
	if !lsnPattern.MatchString(j["current_lsn"]) {
		t.Errorf("walrelay lsn -o json: current_lsn = %q", j["current_lsn"])
	}
	for _, c := range []struct{ a, b, want string }{
		{"0/2000000", "0/1000000", "16777216 bytes (16.0 MiB)\n"},
		{"0/1000000", "0/2000000", "-16777216 bytes (-16.0 MiB)\n"},
		{"1/0", "0/FFFFFC00", "1024 bytes (1.0 KiB)\n"},
		{"0/16B3748", "0/16B3748", "0 bytes (0 B)\n"},
	} {
		if got := wantOK(t, childEnv(), "lsn", "diff", c.a, c.b); got != c.want {
			t.Errorf("lsn diff %s %s = %q, want %q", c.a, c.b, got, c.want)
		}
	}
	d := decodeJSON[map[string]any](t, wantOK(t, childEnv(), "lsn", "diff", "0/2000000", "0/1000000", "-o", "json"))
	if d["bytes"] != float64(16777216) || d["human"] != "16.0 MiB" {
		t.Errorf("lsn diff -o json = %v", d)
	}
	t.Run("diff agrees with pg_wal_lsn_diff", func(t *testing.T) {
		for _, c := range []struct{ name, a, b, human string }{
			{"whole range ahead", "FFFFFFFF/FFFFFFFF", "0/0", "16.0 EiB"},
			{"whole range behind", "0/0", "FFFFFFFF/FFFFFFFF", "-16.0 EiB"},
			{"past int64", "80000000/0", "0/0", "8.0 EiB"},
			{"across int64's sign", "7FFFFFFF/FFFFFFFF", "80000000/0", "-1 B"},
			{"high and close", "FFFFFFFF/FFFFFFFF", "FFFFFFFF/FFFFF9FF", "1.5 KiB"},
			{"typical", "0/2000000", "0/1000000", "16.0 MiB"},
		} {
			t.Run(c.name, func(t *testing.T) {
				want := testenv.QueryValue[string](t, dsn, `SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::text`, c.a, c.b)
				if got := wantOK(t, childEnv(), "lsn", "diff", c.a, c.b); got != want+" bytes ("+c.human+")\n" {
					t.Errorf("lsn diff %s %s = %q; pg_wal_lsn_diff says %s bytes (%s)", c.a, c.b, got, want, c.human)
				}
				out := wantOK(t, childEnv(), "lsn", "diff", c.a, c.b, "-o", "json")
				dec := json.NewDecoder(strings.NewReader(out))
				dec.UseNumber()
				var j struct {
					A, B  string
					Bytes json.Number
					Human string
				}
				if err := dec.Decode(&j); err != nil {
					t.Fatalf("lsn diff -o json: %v\n%s", err, out)
				}
				if j.Bytes.String() != want || j.Human != c.human || j.A != c.a || j.B != c.b {
					t.Errorf("lsn diff %s %s -o json = %s; pg_wal_lsn_diff says %s bytes (%s)", c.a, c.b, out, want, c.human)
				}
			})
		}
	})
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"malformed A", []string{"lsn", "diff", "xyz", "0/1"}, []string{`malformed LSN "xyz": want the form 0/16B3748`}},
		{"malformed B", []string{"lsn", "diff", "0/1", "0/1/2"}, []string{`malformed LSN "0/1/2"`}},
		{"one argument", []string{"lsn", "diff", "0/1"}, []string{"2 arg"}},
		{"bad output", []string{"lsn", "-o", "yaml"}, []string{`-o "yaml": want table or json`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := walrelay(t, env, c.args...)
			wantFailure(t, stdout, stderr, code, 2, c.want...)
		})
	}
	t.Run("server unreachable", func(t *testing.T) {
		stdout, stderr, code := walrelay(t, childEnv("WALRELAY_POSTGRES_DSN="+withPassword(t, dsn, "pw", closedPort(t))), "lsn")
		wantFailure(t, stdout, stderr, code, 1, "cannot reach postgres at 127.0.0.1:", "connection refused", "check that the server is running")
	})
}
