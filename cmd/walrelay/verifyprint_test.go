package main

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/reconcile"
)

// printVerify names the table of a one-table report as before, and every
// table of a report over several.
func TestPrintVerifyNamesTheTables(t *testing.T) {
	since := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		tables []string
		want   string
	}{
		{"one table", []string{`"public"."outbox"`}, `window: created_at = [2026-11-28T12:00:00Z, 2026-11-28T13:00:00Z) of "public"."outbox", margin 5m0s` + "\n"},
		{"two tables", []string{`"public"."outbox"`, `"billing"."outbox"`}, `window: created_at = [2026-11-28T12:00:00Z, 2026-11-28T13:00:00Z) of tables "public"."outbox", "billing"."outbox", margin 5m0s` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &reconcile.Report{Since: since, Until: since.Add(time.Hour), Margin: "5m0s", TimeColumn: "created_at",
				Tables: tc.tables, Table: strings.Join(tc.tables, ", "), FenceConfirmed: true}
			var b strings.Builder
			if err := printVerify(&b, rep); err != nil {
				t.Fatal(err)
			}
			if first, _, _ := strings.Cut(b.String(), "\n"); first+"\n" != tc.want {
				t.Errorf("first line %q, want %q", first, strings.TrimSuffix(tc.want, "\n"))
			}
		})
	}
}
