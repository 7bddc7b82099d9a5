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

	"github.com/walrelay/walrelay/pkg/setup"
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
)

// rowsSQL is the INSERT of rows first..last of aggregate type agg. Each row
// is an outbox event as an application writes it; its jsonb payload holds
// the row's sequence number (seq) and the insert time in microseconds since
// the epoch (ts), which live mode reads back from Kafka.
const rowsSQL = `INSERT INTO ` + qualTable + ` (aggregatetype, aggregateid, type, payload)
SELECT %s, 'A-' || (s.i %% 10000), 'OrderCreated',
       jsonb_build_object('seq', s.i, 'ts', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
                          'orderId', 'O-' || s.i, 'customerId', 'C-' || (s.i %% 977),
                          'totalCents', (s.i * 37) %% 100000, 'currency', 'EUR', 'pad', repeat('x', %s))
FROM generate_series(%s, %s) AS s(i)`

// fillSQL creates the procedure that writes a backlog: n rows from first,
// per_tx rows per transaction, committing each transaction (so one CALL
// makes many transactions), with a progress NOTICE every 10000 rows.
var fillSQL = `CREATE OR REPLACE PROCEDURE ` + schemaName + `.fill(agg text, first_seq bigint, n bigint, per_tx int, pad int)
LANGUAGE plpgsql AS $$
DECLARE
	done bigint := 0;
	reported bigint := 0;
	k int;
BEGIN
	WHILE done < n LOOP
		k := least(per_tx, n - done);
		` + fmt.Sprintf(rowsSQL, "agg", "pad", "first_seq + done", "first_seq + done + k - 1") + `;
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
// for it.
func (d *db) createSlot(ctx context.Context, name string) error {
	if err := d.dropSlot(ctx, name); err != nil {
		return err
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
func (d *db) avgPayload(ctx context.Context, agg string) (float64, error) {
	var v *float64
	err := d.conn.QueryRow(ctx, `SELECT avg(octet_length(payload::text))::float8 FROM (SELECT payload FROM `+qualTable+` WHERE aggregatetype = $1 LIMIT 1000) p`, agg).Scan(&v)
	if err != nil || v == nil {
		return 0, err
	}
	return *v, nil
}

// buildBacklog writes b in agg's rows: single statements for onetx, the
// fill procedure from cfg.Writers connections otherwise. progress is added
// to as rows commit (for onetx only at the end).
func buildBacklog(ctx context.Context, dsn string, b Backlog, agg string, writers, pad int, progress *atomic.Int64) error {
	quoted := quoteLiteral(agg)
	if b.Shape.RowsPerTx == 0 {
		conn, err := pgconn.Connect(ctx, dsn)
		if err != nil {
			return fmt.Errorf("connecting a writer: %w", err)
		}
		defer conn.Close(context.Background())
		sql := fmt.Sprintf(rowsSQL, quoted, fmt.Sprint(pad), "1", fmt.Sprint(b.N))
		if _, err := conn.Exec(ctx, sql).ReadAll(); err != nil {
			return fmt.Errorf("inserting %d rows in one transaction: %w", b.N, err)
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
					sql := fmt.Sprintf(`CALL %s.fill(%s, %d, %d, %d, %d)`, schemaName, quoted, start, n, b.Shape.RowsPerTx, pad)
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
