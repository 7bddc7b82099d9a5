package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/partition"
	"github.com/walrelay/walrelay/internal/txfence"
)

// Partition is one partition of a partitioned outbox, read from the
// catalog (pg_inherits, pg_get_expr(relpartbound)).
type Partition struct {
	OID    uint32 `json:"-"`
	Schema string `json:"schema"`
	Name   string `json:"name"`
	// Upper is the exclusive upper bound of its range; nil for the
	// DEFAULT partition and a MAXVALUE bound, which are never dropped.
	Upper   *time.Time `json:"upper,omitempty"`
	Default bool       `json:"default,omitempty"`
	// DetachPending: a DETACH ... CONCURRENTLY was interrupted; it is
	// finished (FINALIZE) before anything else.
	DetachPending bool `json:"detach_pending,omitempty"`
}

// Qualified is the partition's quoted schema-qualified name.
func (p Partition) Qualified() string { return pgx.Identifier{p.Schema, p.Name}.Sanitize() }

func (p Partition) String() string { return p.Schema + "." + p.Name }

// tableKind tells a plain outbox from a partitioned one (table in
// postgres.table's form), as internal/partition reads it. A partitioned outbox
// must be partitioned by range of the time column alone for its
// partitions' bounds to say how old their rows are.
func tableKind(ctx context.Context, conn *pgx.Conn, table, timeCol string) (partitioned bool, err error) {
	layout, err := partition.Inspect(ctx, conn, table)
	switch {
	case errors.Is(err, partition.ErrNoTable):
		return false, fmt.Errorf("%w %s does not exist: fix postgres.table (or create it with walrelay setup)", ErrTable, table)
	case err != nil:
		return false, err
	case !layout.Partitioned:
		return false, nil
	case !layout.RangeOn(timeCol):
		return true, fmt.Errorf("%w %s is %s, not by range of outbox.time_column %q alone: retention cannot tell its partitions' age; partition it by RANGE (%s) or fix outbox.time_column", ErrTable, table, layout, timeCol, timeCol)
	}
	return true, nil
}

// ListPartitions returns the partitions of table (postgres.table's form)
// as partition.List reads them, oldest first, the DEFAULT partition last.
func ListPartitions(ctx context.Context, conn *pgx.Conn, table string) ([]Partition, error) {
	parts, err := partition.List(ctx, conn, table)
	if err != nil {
		return nil, err
	}
	out := make([]Partition, len(parts))
	for i, pt := range parts {
		out[i] = Partition{Schema: pt.Schema, Name: pt.Name, Default: pt.Default, DetachPending: pt.DetachPending}
		if pt.Bounded() {
			upper := pt.To
			out[i].Upper = &upper
		}
	}
	return out, nil
}

// detachedMarker is the comment retention puts on a partition before it
// detaches it: a table carrying it that is no longer a partition waits for
// a confirmed fence taken after its detach, and is then dropped.
func detachedMarker(table, slot string) string {
	return fmt.Sprintf("walrelay retention: detached from %s; dropped once slot %s confirmed a fence taken after the detach", table, slot)
}

// detached lists the tables retention detached from table and has not
// dropped yet.
func detached(ctx context.Context, conn *pgx.Conn, marker string) ([]Partition, error) {
	rows, err := conn.Query(ctx, `SELECT c.oid, n.nspname::text, c.relname::text
		FROM pg_description d JOIN pg_class c ON c.oid = d.objoid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE d.classoid = 'pg_class'::regclass AND d.objsubid = 0 AND d.description = $1
		  AND c.relkind IN ('r', 'p') AND NOT c.relispartition
		ORDER BY 3`, marker)
	if err != nil {
		return nil, fmt.Errorf("listing detached partitions: %w", err)
	}
	parts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Partition, error) {
		var p Partition
		err := r.Scan(&p.OID, &p.Schema, &p.Name)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing detached partitions: %w", err)
	}
	return parts, nil
}

// hasDefault reports whether parts has a DEFAULT partition, with which
// Postgres refuses DETACH ... CONCURRENTLY.
func hasDefault(parts []Partition) bool {
	for _, p := range parts {
		if p.Default {
			return true
		}
	}
	return false
}

// detachLockTimeout bounds how long a plain DETACH waits for its ACCESS
// EXCLUSIVE lock on the outbox: inserts queue behind the waiting lock.
const detachLockTimeout = time.Second

// detach marks p and detaches it from table: CONCURRENTLY (which does not
// block inserts) unless the table has a DEFAULT partition, then plainly
// with a short lock_timeout. Once it returns, every transaction that
// inserted into p has ended. A DETACH ... CONCURRENTLY interrupted after
// its first transaction leaves p pending; finalize finishes it.
func detach(ctx context.Context, conn *pgx.Conn, table string, p Partition, marker string, concurrently bool) error {
	if _, err := conn.Exec(ctx, fmt.Sprintf(`COMMENT ON TABLE %s IS %s`, p.Qualified(), quoteLiteral(marker))); err != nil {
		return fmt.Errorf("marking partition %s before detaching it: %w", p, err)
	}
	if concurrently {
		if _, err := conn.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s DETACH PARTITION %s CONCURRENTLY`, table, p.Qualified())); err != nil {
			return fmt.Errorf("detaching partition %s concurrently: %w", p, explainTimeout(err))
		}
		return nil
	}
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = %d`, detachLockTimeout.Milliseconds())); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s DETACH PARTITION %s`, table, p.Qualified()))
		return err
	})
	if err != nil {
		return fmt.Errorf("detaching partition %s (plain DETACH: the table has a DEFAULT partition, so not CONCURRENTLY): %w", p, explainTimeout(err))
	}
	return nil
}

// finalize completes an interrupted DETACH ... CONCURRENTLY.
func finalize(ctx context.Context, conn *pgx.Conn, table string, p Partition) error {
	if _, err := conn.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s DETACH PARTITION %s FINALIZE`, table, p.Qualified())); err != nil {
		return fmt.Errorf("finishing the interrupted detach of partition %s: %w", p, explainTimeout(err))
	}
	return nil
}

// drop drops a detached partition, if it is still there and still
// carries the marker.
func drop(ctx context.Context, conn *pgx.Conn, p Partition, marker string) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var ok bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_description d JOIN pg_class c ON c.oid = d.objoid
			WHERE d.objoid = $1 AND d.classoid = 'pg_class'::regclass AND d.objsubid = 0 AND d.description = $2 AND NOT c.relispartition)`,
			p.OID, marker).Scan(&ok)
		if err != nil || !ok {
			return err
		}
		if _, err := tx.Exec(ctx, `DROP TABLE `+p.Qualified()); err != nil {
			return fmt.Errorf("dropping detached partition %s: %w", p, explainTimeout(err))
		}
		return nil
	})
}

// quoteLiteral quotes s as an SQL string literal (COMMENT takes no
// parameters).
func quoteLiteral(s string) string {
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, '\'')
		}
		out = append(out, s[i])
	}
	return string(append(out, '\''))
}

// observeDetached notes the partitions detached from table t not seen
// yet: each may be dropped once a fence taken after this moment is
// confirmed.
func (p *Pruner) observeDetached(ctx context.Context, conn *pgx.Conn, t outboxTable) error {
	parts, err := detached(ctx, conn, t.marker)
	if err != nil {
		return err
	}
	for _, d := range parts {
		if _, ok := p.detached[d.OID]; !ok {
			p.detached[d.OID] = p.seq + 1
		}
	}
	return nil
}

// dropDetached drops the partitions detached from table t whose first
// fence taken after their detach is f or older.
func (p *Pruner) dropDetached(ctx context.Context, conn *pgx.Conn, t outboxTable, f txfence.Fence, res *TableResult) error {
	parts, err := detached(ctx, conn, t.marker)
	if err != nil {
		return err
	}
	for _, d := range parts {
		after, ok := p.detached[d.OID]
		if !ok || after > f.Seq {
			continue
		}
		if !p.cfg.DryRun {
			if err := drop(ctx, conn, d, t.marker); err != nil {
				return err
			}
			delete(p.detached, d.OID)
			if p.m.PartitionsDropped != nil {
				p.m.PartitionsDropped.WithLabelValues(t.name).Inc()
			}
		}
		res.Dropped = append(res.Dropped, d.String())
	}
	return nil
}

// detachOld detaches the partitions of table t whose upper bound is older
// than both the retention and the confirmed fence f (so their rows very
// likely are confirmed; a fence after the detach decides), finishing
// interrupted detaches first.
func (p *Pruner) detachOld(ctx context.Context, conn *pgx.Conn, t outboxTable, f txfence.Fence, res *TableResult) error {
	parts, err := ListPartitions(ctx, conn, t.name)
	if err != nil {
		return err
	}
	var now time.Time
	if err := conn.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return fmt.Errorf("reading the server's clock: %w", err)
	}
	limit := now.Add(-p.cfg.Retention)
	if f.Taken.Before(limit) {
		limit = f.Taken
	}
	concurrently := !hasDefault(parts)
	for _, part := range parts {
		if part.Default || part.Upper == nil {
			continue
		}
		if part.DetachPending {
			if !p.cfg.DryRun {
				if err := finalize(ctx, conn, t.quoted, part); err != nil {
					return err
				}
			}
			res.Detached = append(res.Detached, part.String())
			continue
		}
		if part.Upper.After(limit) {
			continue
		}
		if !p.cfg.DryRun {
			if err := detach(ctx, conn, t.quoted, part, t.marker, concurrently); err != nil {
				return err
			}
		}
		res.Detached = append(res.Detached, part.String())
	}
	return nil
}
