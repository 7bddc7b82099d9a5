package inbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultTable is the inbox table when Config.Table is empty.
const DefaultTable = "public.inbox"

// DefaultIDHeader is the header walrelay (and Debezium's Outbox Event
// Router) put the event id in.
const DefaultIDHeader = "id"

// Config names the inbox table and the header holding the event id. The
// zero value is public.inbox and header "id".
type Config struct {
	// Table is "schema.table" or "table", unquoted. Default DefaultTable.
	Table string
	// IDHeader is the record header holding the event id. Default
	// DefaultIDHeader.
	IDHeader string
}

// Handler makes an event's business change in tx, the transaction that
// records the event id. It must not commit or roll back tx, and should
// write only through tx: what it does elsewhere is not undone when the
// transaction rolls back and not deduplicated. An error rolls back the
// change and the inbox row; the event is then processed again.
type Handler func(ctx context.Context, tx pgx.Tx, rec *kgo.Record) error

// Beginner starts a transaction: *pgxpool.Pool and *pgx.Conn are
// Beginners.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Execer runs a statement: *pgxpool.Pool, *pgx.Conn and pgx.Tx are
// Execers.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Inbox records processed event ids in one table. Create it with New; it
// holds no connection and is safe for concurrent use.
type Inbox struct {
	name     string // as configured, for messages
	table    pgx.Identifier
	idHeader string
	insert   string
}

// New validates cfg and returns an Inbox. Errors wrap ErrInvalidConfig.
func New(cfg Config) (*Inbox, error) {
	name := cfg.Table
	if name == "" {
		name = DefaultTable
	}
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("%w: Table %q: want \"schema.table\" or \"table\", unquoted", ErrInvalidConfig, name)
	}
	for _, p := range parts {
		// 63 bytes less the "_processed_at" of the index name.
		if p == "" || len(p) > 63-len("_processed_at") || !utf8.ValidString(p) || strings.ContainsRune(p, 0) {
			return nil, fmt.Errorf("%w: Table %q: each name must be 1 to 50 bytes of UTF-8 text without NUL", ErrInvalidConfig, name)
		}
	}
	in := &Inbox{name: name, table: pgx.Identifier(parts), idHeader: cfg.IDHeader}
	if in.idHeader == "" {
		in.idHeader = DefaultIDHeader
	}
	in.insert = `INSERT INTO ` + in.table.Sanitize() + ` (id, topic, kafka_partition, kafka_offset)
		VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING`
	return in, nil
}

// DDL returns the statements that create the inbox table and its index,
// idempotently.
//
// id is text so any event id fits (a uuid column would take 16 bytes
// instead of 37, if every producer's ids are UUIDs). The topic, partition
// and offset say where an event was first read; processed_at, indexed,
// is what Prune deletes by.
func (in *Inbox) DDL() string {
	index := pgx.Identifier{in.table[len(in.table)-1] + "_processed_at"}.Sanitize()
	return `CREATE TABLE IF NOT EXISTS ` + in.table.Sanitize() + ` (
    id              text        PRIMARY KEY,           -- the event id: Kafka header "` + in.idHeader + `"
    topic           text        NOT NULL,              -- where it was first read
    kafka_partition integer     NOT NULL,
    kafka_offset    bigint      NOT NULL,
    processed_at    timestamptz NOT NULL DEFAULT now() -- Prune removes ids by it
);
CREATE INDEX IF NOT EXISTS ` + index + ` ON ` + in.table.Sanitize() + ` (processed_at);
`
}

// Create runs DDL on db.
func (in *Inbox) Create(ctx context.Context, db Execer) error {
	if _, err := db.Exec(ctx, in.DDL()); err != nil {
		return fmt.Errorf("creating inbox table %s: %w", in.name, err)
	}
	return nil
}

// EventID returns the record's event id: the value of its first IDHeader
// header, or "" when it has none.
func (in *Inbox) EventID(rec *kgo.Record) string {
	for _, h := range rec.Headers {
		if h.Key == in.idHeader {
			return string(h.Value)
		}
	}
	return ""
}

// Process applies rec once: in one transaction of db it inserts rec's
// event id into the inbox and, when the id was not there, runs h; then it
// commits. applied says whether h ran and committed; false with a nil
// error is a duplicate, skipped. On an error nothing of the transaction
// remains (the inbox row neither), so processing rec again is safe.
func (in *Inbox) Process(ctx context.Context, db Beginner, rec *kgo.Record, h Handler) (applied bool, err error) {
	id := in.EventID(rec)
	if id == "" {
		return false, fmt.Errorf("%w %q: %s[%d] offset %d; the producer must set it (walrelay sets it from the outbox id)",
			ErrNoEventID, in.idHeader, rec.Topic, rec.Partition, rec.Offset)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("beginning the inbox transaction of event %s: %w", id, err)
	}
	defer func() {
		if err != nil || !applied {
			if rerr := tx.Rollback(context.WithoutCancel(ctx)); rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
				err = errors.Join(err, fmt.Errorf("rolling back the inbox transaction of event %s: %w", id, rerr))
			}
		}
	}()
	tag, err := tx.Exec(ctx, in.insert, id, rec.Topic, rec.Partition, rec.Offset)
	if err != nil {
		return false, fmt.Errorf("recording event %s in inbox %s: %w", id, in.name, err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil // processed before
	}
	if err := h(ctx, tx, rec); err != nil {
		return false, fmt.Errorf("handling event %s (%s[%d] offset %d): %w", id, rec.Topic, rec.Partition, rec.Offset, err)
	}
	if err := tx.Commit(ctx); err != nil {
		// The commit's outcome may be unknown (a lost connection); processing
		// the event again is safe either way.
		return false, fmt.Errorf("committing event %s: %w", id, err)
	}
	return true, nil
}

// Prune deletes the ids processed before cutoff, in batches of at most
// batch rows (1000 when batch <= 0) so no transaction holds many row
// locks, and returns how many it deleted. An event delivered again after
// its id was pruned is applied again: keep ids longer than any event can
// be re-delivered.
func (in *Inbox) Prune(ctx context.Context, db Execer, cutoff time.Time, batch int) (int64, error) {
	if batch <= 0 {
		batch = 1000
	}
	t := in.table.Sanitize()
	query := `DELETE FROM ` + t + ` WHERE ctid = ANY (ARRAY(SELECT ctid FROM ` + t + ` WHERE processed_at < $1 LIMIT $2))`
	var total int64
	for {
		tag, err := db.Exec(ctx, query, cutoff, batch)
		if err != nil {
			return total, fmt.Errorf("pruning inbox %s before %s: %w", in.name, cutoff.Format(time.RFC3339), err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
	}
}
