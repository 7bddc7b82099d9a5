package retention

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/txfence"
)

// confirmedRowsSQL selects the rows of a table (%[1]s, the time column
// %[2]s) that are older than the retention ($1, seconds before now()) and
// whose xmin precedes the fence's xmin X (txfence.PrecedesSQL, with $2 =
// X mod 2^32 and $3 = the window txfence.Window computes). See
// docs/DESIGN.md, "Retention", for why this is exact for every row visible
// to the statement but for ancient frozen rows whose 32-bit xmin happens
// to fall in the window, which are kept until the next fence.
var confirmedRowsSQL = `%[2]s < now() - make_interval(secs => $1)
	AND ` + strings.ReplaceAll(txfence.PrecedesSQL(txfence.XminExpr, "$2", "$3"), "%", "%%")

// deleteBatch removes up to batch confirmed rows older than retention from
// table (quoted) in one REPEATABLE READ transaction, so the rows deleted
// are exactly those its snapshot saw (a row another transaction changed
// meanwhile fails the batch with a serialization error instead of being
// re-read). With count it deletes nothing and counts the rows instead
// (batch is ignored).
func deleteBatch(ctx context.Context, conn *pgx.Conn, table, timeCol string, retention time.Duration, f txfence.Fence, batch int, count bool) (int64, error) {
	var n int64
	err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		x32, window, err := txfence.Window(ctx, tx, f)
		if err != nil {
			return err
		}
		pred := fmt.Sprintf(confirmedRowsSQL, table, timeCol)
		if count {
			return tx.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE `+pred, retention.Seconds(), x32, window).Scan(&n)
		}
		tag, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE ctid = ANY(ARRAY(SELECT ctid FROM `+table+` WHERE `+pred+` LIMIT $4))`,
			retention.Seconds(), x32, window, batch)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		return nil
	})
	if err != nil {
		verb := "deleting a batch of rows"
		if count {
			verb = "counting the rows to prune"
		}
		return 0, fmt.Errorf("%s from %s: %w", verb, table, explainTimeout(err))
	}
	return n, nil
}

// explainTimeout adds the option to raise to a statement_timeout error.
func explainTimeout(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "57014" {
		return fmt.Errorf("%w (raise outbox.prune_statement_timeout, or lower outbox.prune_batch; an index on outbox.time_column makes each batch cheap)", err)
	}
	return err
}

// serializationFailure reports a batch that met a concurrent change.
func serializationFailure(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// removeRows deletes batches from table t until one removes fewer than
// Batch rows.
func (p *Pruner) removeRows(ctx context.Context, conn *pgx.Conn, t outboxTable, f txfence.Fence, res *TableResult) error {
	if p.cfg.DryRun {
		n, err := deleteBatch(ctx, conn, t.quoted, p.timeCol, p.cfg.Retention, f, 0, true)
		res.Rows = n
		return err
	}
	start := time.Now()
	retries := 0
	for ctx.Err() == nil {
		n, err := deleteBatch(ctx, conn, t.quoted, p.timeCol, p.cfg.Retention, f, p.cfg.Batch, false)
		if err != nil {
			if serializationFailure(err) && retries < 3 {
				retries++ // a row of the batch changed meanwhile: take the batch again
				continue
			}
			return err
		}
		retries = 0
		res.Rows += n
		res.Batches++
		res.Deleting = time.Since(start)
		if p.m.RowsPruned != nil {
			p.m.RowsPruned.WithLabelValues(t.name).Add(float64(n))
		}
		if p.OnProgress != nil {
			p.OnProgress(Progress{Table: t.name, Rows: res.Rows, Batches: res.Batches, Elapsed: time.Since(start)})
		}
		if n < int64(p.cfg.Batch) {
			return nil
		}
	}
	return ctx.Err()
}
