package pgsession_test

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/pgsession"
	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// databaseWithOtherSettings is a new database whose own settings differ
// from every one of pgsession.Settings.
func databaseWithOtherSettings(t *testing.T) string {
	t.Helper()
	dsn := testenv.Postgres(t).NewDatabase(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := pgx.Identifier{cfg.Database}.Sanitize()
	for _, s := range []string{"extra_float_digits = 0", "TimeZone = 'America/New_York'", "DateStyle = 'SQL, DMY'", "bytea_output = 'escape'"} {
		testenv.Exec(t, dsn, "ALTER DATABASE "+db+" SET "+s)
	}
	return dsn
}

// The float sum prints 0.30000000000000004 with extra_float_digits=3 (as
// pgoutput prints it for the relay), 0.3 with the database's 0.
const values = `SELECT (0.1::float8 + 0.2::float8)::text, '\x01ff'::bytea::text, timestamptz '2026-01-02 03:04:05+00'::text`

var want = []string{"0.30000000000000004", `\x01ff`, "2026-01-02 03:04:05+00"}

// same reports whether setting k reads got where v was set: DateStyle
// ISO reads "ISO, MDY" (the field order, which ISO output does not use).
func same(k, got, v string) bool {
	if k == "DateStyle" {
		got, _, _ = strings.Cut(got, ",")
	}
	return got == v
}

func TestConnectPinsSettings(t *testing.T) {
	dsn := databaseWithOtherSettings(t)
	if got := testenv.QueryValue[string](t, dsn, `SELECT (0.1::float8 + 0.2::float8)::text`); got != "0.3" {
		t.Fatalf("the database's own extra_float_digits=0 prints %q; want 0.3 (the test's premise)", got)
	}
	ctx := t.Context()

	check := func(t *testing.T, conn *pgx.Conn) {
		t.Helper()
		got := make([]string, 3)
		if err := conn.QueryRow(ctx, values).Scan(&got[0], &got[1], &got[2]); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("value %d prints %q; want %q as pgoutput prints it", i, got[i], want[i])
			}
		}
		for k, v := range pgsession.Settings() {
			var s string
			if err := conn.QueryRow(ctx, "SELECT current_setting($1)", k).Scan(&s); err != nil {
				t.Fatal(err)
			}
			if !same(k, s, v) {
				t.Errorf("%s = %q; want %q", k, s, v)
			}
		}
	}
	t.Run("Connect", func(t *testing.T) {
		conn, err := pgsession.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		check(t, conn)
	})
	t.Run("ConnectConfig keeps the caller's parameters and config", func(t *testing.T) {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["application_name"] = "walrelay test"
		before := maps.Clone(cfg.RuntimeParams)
		conn, err := pgsession.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		check(t, conn)
		var app string
		if err := conn.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&app); err != nil || app != "walrelay test" {
			t.Errorf("application_name = %q, %v; want the caller's", app, err)
		}
		if !maps.Equal(cfg.RuntimeParams, before) {
			t.Errorf("ConnectConfig changed the caller's config: %v, was %v", cfg.RuntimeParams, before)
		}
	})
	t.Run("ConnectReplication", func(t *testing.T) {
		cfg, err := pgconn.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pgsession.ConnectReplication(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if _, ok := cfg.RuntimeParams["replication"]; ok {
			t.Error("ConnectReplication changed the caller's config")
		}
		// IDENTIFY_SYSTEM answers only on a replication connection.
		if _, err := conn.Exec(ctx, "IDENTIFY_SYSTEM").ReadAll(); err != nil {
			t.Fatalf("IDENTIFY_SYSTEM: %v (not a replication connection?)", err)
		}
		for k, v := range pgsession.Settings() {
			res, err := conn.Exec(ctx, "SHOW "+k).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			if got := string(res[0].Rows[0][0]); !same(k, got, v) {
				t.Errorf("%s = %q on the replication connection; want %q", k, got, v)
			}
		}
	})
}
