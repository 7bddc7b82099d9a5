package setup_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/setup"
	"github.com/walrelay/walrelay/internal/testenv"
)

// A transaction writing the table to be added that outlasts the lock
// timeout fails that step: the table is not added (the publication is
// unchanged: adding it then would lose the rows the transaction wrote
// before), and the error names the table and the writer's server process.
// Once the transaction has committed, setup adds the table and counts its
// row among those held before.
func TestRunAddTableWaitsForWriters(t *testing.T) {
	dsn := testenv.Postgres(t).NewDatabase(t)
	conn := testenv.Connect(t, dsn)
	ctx := t.Context()
	testenv.Exec(t, dsn, `CREATE SCHEMA billing`)
	names := setup.Names{Tables: []config.TableName{public}, Publication: "walrelay_outbox", Slot: testenv.UniqueName(t, "slot"), TimeColumn: "created_at"}
	if _, err := setup.Run(ctx, conn, names); err != nil {
		t.Fatalf("setup with public.outbox: %v", err)
	}
	testenv.Exec(t, dsn, `CREATE TABLE billing.outbox (LIKE public.outbox INCLUDING ALL)`)

	writer := testenv.Connect(t, dsn)
	tx, err := writer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var pid int32
	if err := tx.QueryRow(ctx, `INSERT INTO billing.outbox (aggregatetype, aggregateid, type, payload) VALUES ('a', 'k', 'T', '{}') RETURNING pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}

	names.Tables = []config.TableName{public, billing}
	names.LockTimeout = 300 * time.Millisecond
	steps, err := setup.Run(ctx, conn, names)
	var (
		add  *setup.AddTableError
		busy *setup.BusyTableError
	)
	if !errors.As(err, &add) || !errors.As(err, &busy) {
		t.Fatalf("setup while a transaction writes billing.outbox: steps %q, err %v; want a BusyTableError in an AddTableError", stepLines(steps), err)
	}
	t.Log(err)
	if busy.Table != "billing.outbox" || add.Table != "billing.outbox" || !slices.Contains(busy.PIDs, pid) || busy.Timeout != names.LockTimeout {
		t.Errorf("error names table %q (%q), writers %v, timeout %s; want billing.outbox, server process %d, %s", busy.Table, add.Table, busy.PIDs, busy.Timeout, pid, names.LockTimeout)
	}
	for _, s := range []string{`adding table billing.outbox to publication "walrelay_outbox"`, "server processes " + strconv.Itoa(int(pid)), "billing.outbox was not added", "run walrelay setup again"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error lacks %q: %v", s, err)
		}
	}
	for _, s := range steps {
		if s.Object == "publication" && s.Created {
			t.Errorf("step %q although the table was not added", s)
		}
	}
	if got := published(t, dsn, "walrelay_outbox"); got != "public.outbox" {
		t.Errorf("publication holds %q after the timeout, want public.outbox alone", got)
	}

	// The writer was not disturbed; once it has committed, setup adds the
	// table and its row is one held before.
	if _, err := tx.Exec(ctx, `INSERT INTO billing.outbox (aggregatetype, aggregateid, type, payload) VALUES ('a', 'k', 'T', '{}')`); err != nil {
		t.Fatalf("the writer after setup's timeout: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	steps, err = setup.Run(ctx, conn, names)
	if err != nil {
		t.Fatalf("setup after the writer committed: %v", err)
	}
	got := strings.Join(stepLines(steps), "\n")
	if !strings.Contains(got, "publication walrelay_outbox billing.outbox added\n") || !strings.Contains(got, "warning billing.outbox holds 2 rows committed before it was added (created_at ") {
		t.Errorf("steps after the writer committed:\n%s", got)
	}
	if got := published(t, dsn, "walrelay_outbox"); got != "billing.outbox public.outbox" {
		t.Errorf("publication holds %q, want both tables", got)
	}
}
