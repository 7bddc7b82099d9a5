package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/setup"
)

// Names of what the harness creates in Postgres. It works in its own schema
// and publication so it can run against a database that has a real outbox.
const (
	schemaName  = "walrelay_bench"
	tableName   = "outbox"
	pubName     = "walrelay_bench"
	slotPrefix  = "walrelay_bench_" // every slot the harness creates
	relaySlot   = slotPrefix + "relay"
	floorSlot   = slotPrefix + "floor"
	qualTable   = schemaName + "." + tableName
	progressMsg = "walrelay_bench rows"
	// messagePrefix is walrelay's outbox.message_prefix in the message
	// style's drains.
	messagePrefix = "walrelay_bench"
)

// payloadSQL is the jsonb payload of event s.i, with the padding (%s) that
// brings it to Config.PayloadBytes. It holds the event's sequence number
// (seq) and the insert time in microseconds since the epoch (ts), which
// live mode reads back from Kafka.
const payloadSQL = `jsonb_build_object('seq', s.i, 'ts', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
                          'orderId', 'O-' || s.i, 'customerId', 'C-' || (s.i %% 977),
                          'totalCents', (s.i * 37) %% 100000, 'currency', 'EUR', 'pad', repeat('x', %s))`

// rowsSQL is the INSERT of rows first..last of aggregate type agg. Each row
// is an outbox event as an application writes it (the table's defaults
// give it its id and created_at).
const rowsSQL = `INSERT INTO ` + qualTable + ` (aggregatetype, aggregateid, type, payload)
SELECT %s, 'A-' || (s.i %% 10000), 'OrderCreated',
       ` + payloadSQL + `
FROM generate_series(%s, %s) AS s(i)`

// messagesSQL emits events first..last of aggregate type agg as logical
// decoding messages (the table-less outbox): the same fields as a row of
// rowsSQL, id and created_at included, as one JSON object each. Its value
// is the number of messages.
const messagesSQL = `SELECT count(pg_logical_emit_message(true, '` + messagePrefix + `',
       json_build_object('id', gen_random_uuid(), 'aggregatetype', %s, 'aggregateid', 'A-' || (s.i %% 10000),
                         'type', 'OrderCreated', 'created_at', now(), 'payload', ` + payloadSQL + `)::text))
FROM generate_series(%s, %s) AS s(i)`

// eventsSQL is rowsSQL, or messagesSQL for the message style.
func eventsSQL(s Shape) string {
	if s.Messages {
		return messagesSQL
	}
	return rowsSQL
}

// fillSQL creates the procedure that writes a backlog: n events from
// first, per_tx events per transaction, as rows or (msgs) as logical
// messages, committing each transaction (so one CALL makes many
// transactions), with a progress NOTICE every 10000 events.
var fillSQL = `CREATE OR REPLACE PROCEDURE ` + schemaName + `.fill(agg text, first_seq bigint, n bigint, per_tx int, pad int, msgs boolean)
LANGUAGE plpgsql AS $$
DECLARE
	done bigint := 0;
	reported bigint := 0;
	k int;
BEGIN
	WHILE done < n LOOP
		k := least(per_tx, n - done);
		IF msgs THEN
			PERFORM ` + strings.TrimPrefix(fmt.Sprintf(messagesSQL, "agg", "pad", "first_seq + done", "first_seq + done + k - 1"), "SELECT ") + `;
		ELSE
			` + fmt.Sprintf(rowsSQL, "agg", "pad", "first_seq + done", "first_seq + done + k - 1") + `;
		END IF;
		COMMIT;
		done := done + k;
		IF done - reported >= 10000 OR done = n THEN
			RAISE NOTICE '` + progressMsg + ` %', done - reported;
			reported := done;
		END IF;
	END LOOP;
END $$`

// payloadPad is the padding that brings a payload to about want bytes (the
// rest of the jsonb text is about 170 bytes).
func payloadPad(want int) int { return max(0, want-170) }

// db is the harness's view of the Postgres server.
type db struct {
	dsn  string
	conn *pgx.Conn // for setup, slots and LSNs; not used concurrently
}

func openDB(ctx context.Context, dsn string) (*db, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connecting to postgres: %w", err)
	}
	return &db{dsn: dsn, conn: conn}, nil
}

func (d *db) close() { _ = d.conn.Close(context.Background()) }

// serverVersion returns Postgres's version string.
func (d *db) serverVersion(ctx context.Context) (string, error) {
	var v string
	err := d.conn.QueryRow(ctx, `SELECT version()`).Scan(&v)
	return v, err
}

// prepare creates the schema, the outbox table (sql/001_outbox_table.sql),
// the publication (INSERTs only) and the fill procedure, after removing
// whatever a previous run left.
func (d *db) prepare(ctx context.Context) error {
	if err := d.drop(ctx); err != nil {
		return err
	}
	var level string
	if err := d.conn.QueryRow(ctx, `SHOW wal_level`).Scan(&level); err != nil {
		return fmt.Errorf("reading wal_level: %w", err)
	}
	if level != "logical" {
		return fmt.Errorf("postgres has wal_level=%s; the benchmark needs logical", level)
	}
	if _, err := d.conn.Exec(ctx, `CREATE SCHEMA `+schemaName); err != nil {
		return fmt.Errorf("creating schema %s: %w", schemaName, err)
	}
	// setup creates the table and publication; the slots are created per
	// measurement.
	if _, err := setup.Run(ctx, d.conn, setup.Names{Schema: schemaName, Table: tableName, Publication: pubName, Slot: relaySlot}); err != nil {
		return fmt.Errorf("creating the outbox: %w", err)
	}
	if err := d.dropSlot(ctx, relaySlot); err != nil {
		return err
	}
	if _, err := d.conn.Exec(ctx, fillSQL); err != nil {
		return fmt.Errorf("creating the fill procedure: %w", err)
	}
	return nil
}

// drop removes everything the harness creates. Active slots are released
// by terminating their walsenders first.
func (d *db) drop(ctx context.Context) error {
	if err := d.dropSlots(ctx); err != nil {
		return err
	}
	if _, err := d.conn.Exec(ctx, `DROP PUBLICATION IF EXISTS `+pubName); err != nil {
		return fmt.Errorf("dropping publication %s: %w", pubName, err)
	}
	if _, err := d.conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+schemaName+` CASCADE`); err != nil {
		return fmt.Errorf("dropping schema %s: %w", schemaName, err)
	}
	return nil
}

// dropSlots drops every slot the harness created.
func (d *db) dropSlots(ctx context.Context) error {
	rows, err := d.conn.Query(ctx, `SELECT slot_name FROM pg_replication_slots WHERE starts_with(slot_name, $1)`, slotPrefix)
	if err != nil {
		return fmt.Errorf("listing slots: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("listing slots: %w", err)
	}
	for _, n := range names {
		if err := d.dropSlot(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// createSlot (re)creates a pgoutput slot; the WAL from now on is retained
// for it. Each measurement starts on a new slot: walrelay's record of an
// earlier slot of that name (walrelay_slot_positions) is deleted with it,
// or walrelay run would rightly stop on a slot that is not the one it
// confirmed through.
func (d *db) createSlot(ctx context.Context, name string) error {
	if err := d.dropSlot(ctx, name); err != nil {
		return err
	}
	var records *string
	if err := d.conn.QueryRow(ctx, `SELECT to_regclass($1)::text`, schemaName+".walrelay_slot_positions").Scan(&records); err != nil {
		return fmt.Errorf("looking up walrelay's slot records: %w", err)
	}
	if records != nil {
		if _, err := d.conn.Exec(ctx, `DELETE FROM `+*records+` WHERE slot_name = $1`, name); err != nil {
			return fmt.Errorf("deleting walrelay's record of slot %s: %w", name, err)
		}
	}
	if _, err := d.conn.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, name); err != nil {
		return fmt.Errorf("creating slot %s: %w", name, err)
	}
	return nil
}

// dropSlot drops a slot if it exists, terminating a walsender still using
// it (a child that was killed may leave one behind for a moment).
func (d *db) dropSlot(ctx context.Context, name string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var exists, active bool
		err := d.conn.QueryRow(ctx, `SELECT true, active FROM pg_replication_slots WHERE slot_name = $1`, name).Scan(&exists, &active)
		if err == pgx.ErrNoRows {
			return nil
		}
		if err != nil {
			return fmt.Errorf("looking up slot %s: %w", name, err)
		}
		if !active {
			if _, err := d.conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, name); err == nil {
				return nil
			} else if time.Now().After(deadline) {
				return fmt.Errorf("dropping slot %s: %w", name, err)
			}
		} else {
			if _, err := d.conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, name); err != nil {
				return fmt.Errorf("terminating the walsender of slot %s: %w", name, err)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("dropping slot %s: still active after 30s", name)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// currentLSN is the server's current WAL write position.
func (d *db) currentLSN(ctx context.Context) (pglogrepl.LSN, error) {
	var s string
	if err := d.conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&s); err != nil {
		return 0, fmt.Errorf("reading the current WAL position: %w", err)
	}
	return pglogrepl.ParseLSN(s)
}

// truncate empties the outbox (TRUNCATE is not published) and checkpoints,
// so each measurement starts from the same state.
func (d *db) truncate(ctx context.Context) error {
	if _, err := d.conn.Exec(ctx, `TRUNCATE `+qualTable); err != nil {
		return fmt.Errorf("truncating %s: %w", qualTable, err)
	}
	return d.checkpoint(ctx)
}

func (d *db) checkpoint(ctx context.Context) error {
	if _, err := d.conn.Exec(ctx, `CHECKPOINT`); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// avgPayload samples the average payload size in bytes (its JSON text).
// Logical messages are in no table: their payloads are those payloadSQL
// makes, measured on 1000 of them.
func (d *db) avgPayload(ctx context.Context, s Shape, agg string, pad int) (float64, error) {
	var v *float64
	q := `SELECT avg(octet_length(payload::text))::float8 FROM (SELECT payload FROM ` + qualTable + ` WHERE aggregatetype = $1 LIMIT 1000) p`
	args := []any{agg}
	if s.Messages {
		q, args = `SELECT avg(octet_length(`+fmt.Sprintf(payloadSQL, fmt.Sprint(pad))+`::text))::float8 FROM generate_series(1, 1000) AS s(i)`, nil
	}
	err := d.conn.QueryRow(ctx, q, args...).Scan(&v)
	if err != nil || v == nil {
		return 0, err
	}
	return *v, nil
}

// buildBacklog writes b as agg's events (rows, or logical messages in the
// message style): single statements for onetx, the fill procedure from
// cfg.Writers connections otherwise. progress is added to as events
// commit (for onetx only at the end).
func buildBacklog(ctx context.Context, dsn string, b Backlog, agg string, writers, pad int, progress *atomic.Int64) error {
	quoted := quoteLiteral(agg)
	if b.Shape.RowsPerTx == 0 {
		conn, err := pgconn.Connect(ctx, dsn)
		if err != nil {
			return fmt.Errorf("connecting a writer: %w", err)
		}
		defer conn.Close(context.Background())
		sql := fmt.Sprintf(eventsSQL(b.Shape), quoted, fmt.Sprint(pad), "1", fmt.Sprint(b.N))
		if _, err := conn.Exec(ctx, sql).ReadAll(); err != nil {
			return fmt.Errorf("writing %d %s in one transaction: %w", b.N, b.Shape.Style(), err)
		}
		progress.Add(int64(b.N))
		return nil
	}
	// Split the transactions evenly over the writers.
	txs := b.N / b.Shape.RowsPerTx
	writers = max(1, min(writers, txs))
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	first := 1
	for w := range writers {
		n := (txs / writers) * b.Shape.RowsPerTx
		if w < txs%writers {
			n += b.Shape.RowsPerTx
		}
		start := first
		first += n
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg, err := pgconn.ParseConfig(dsn)
			if err == nil {
				cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
					if v, ok := strings.CutPrefix(n.Message, progressMsg+" "); ok {
						var k int64
						if _, err := fmt.Sscan(v, &k); err == nil {
							progress.Add(k)
						}
					}
				}
				var conn *pgconn.PgConn
				if conn, err = pgconn.ConnectConfig(ctx, cfg); err == nil {
					// Simple protocol: CALL with transaction control.
					sql := fmt.Sprintf(`CALL %s.fill(%s, %d, %d, %d, %d, %t)`, schemaName, quoted, start, n, b.Shape.RowsPerTx, pad, b.Shape.Messages)
					_, err = conn.Exec(ctx, sql).ReadAll()
					conn.Close(context.Background())
				}
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("writer %d: %w", w, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("building backlog %s: %w", b, errs[0])
	}
	return nil
}

func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }
