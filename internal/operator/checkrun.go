package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/router"
)

// ErrStartupCheck: a preflight item about what `walrelay run` itself
// reads, prunes or needs of the server failed (CheckRun).
var ErrStartupCheck = errors.New("startup check failed")

// CheckRun runs, on conn, the preflight items of Check that are about
// what `walrelay run` with cfg itself needs: the server version,
// wal_level, the role's REPLICATION, and, when run reads or prunes
// postgres.table (the table is the outbox, or outbox.retention or the
// initial snapshot reads it), for every listed table SELECT on it, its
// partitions and the columns the router names, and the publications,
// which must carry every listed table (one that none carries would be
// pruned but never relayed). It returns the items that failed, in Check's
// words and with its fixes; run refuses to start on any (RunCheckError).
// Items about capacity (max_replication_slots, max_wal_senders) and the
// slot are left to run's own startup, which creates the slot or says why
// it cannot; Kafka is checked by the producer's access check.
func CheckRun(ctx context.Context, conn *pgx.Conn, cfg config.Config) ([]Item, error) {
	rt, err := router.New(cfg.Router, cfg.Converter)
	if err != nil {
		return nil, fmt.Errorf("configuring router: %w", err)
	}
	var failed []Item
	c := newChecker(ctx, conn, cfg, rt, func(it Item) {
		if it.Status == Fail {
			failed = append(failed, it)
		}
	})
	c.noTopics = true // the Kafka items are not run: no scan of the outbox at every start
	c.user = postgres.CurrentUser(ctx, conn)
	c.service = postgres.DetectService(ctx, conn) // for the fixes
	c.serverVersion()
	c.walLevel()
	c.roleReplication()
	if cfg.Outbox.MessagePrefix != "" && cfg.Outbox.Retention == 0 && !cfg.Snapshot.Initial() {
		// A table-less outbox: run does not read postgres.table.
		return failed, nil
	}
	c.tableSelect()
	c.outboxPartitions()
	if len(c.existing()) > 0 {
		if cfg.Outbox.MessagePrefix == "" {
			c.publications()
		}
		for _, t := range c.existing() {
			c.columnsOf(t)
		}
	}
	return failed, nil
}

// RunCheckError is run's refusal for the failed items of CheckRun, on one
// line: each item with what `walrelay check` says and its fix, separated
// by semicolons. It wraps ErrStartupCheck.
func RunCheckError(failed []Item) error {
	var b strings.Builder
	for i, it := range failed {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(it.Name + ": " + it.Detail)
		if it.Fix != "" {
			b.WriteString(": " + it.Fix)
		}
	}
	return fmt.Errorf("%w (walrelay check lists every item): %s", ErrStartupCheck, b.String())
}
