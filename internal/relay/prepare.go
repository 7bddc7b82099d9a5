package relay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/pgcatalog"
	"github.com/walrelay/walrelay/internal/pgsession"
	"github.com/walrelay/walrelay/internal/postgres"
	"github.com/walrelay/walrelay/internal/publisher"
	"github.com/walrelay/walrelay/internal/router"
	"github.com/walrelay/walrelay/internal/slotrecord"
)

// Startup errors. Each is returned wrapped with the names involved.
var (
	// ErrSlotMissing: the slot does not exist and postgres.create_slot is off.
	ErrSlotMissing = errors.New("replication slot does not exist")
	// ErrSlotMismatch: the slot is physical, or belongs to another plugin
	// or database.
	ErrSlotMismatch = errors.New("replication slot is not usable by walrelay")
	// ErrPublicationMissing: a configured publication does not exist.
	ErrPublicationMissing = errors.New("publication does not exist")
	// ErrPublicationLeaves: a configured publication publishes the
	// partitions of a partitioned table under their own names
	// (publish_via_partition_root is off).
	ErrPublicationLeaves = errors.New("publication publishes partitions under their own names")
	// ErrPublicationRecord: a configured publication publishes walrelay's
	// own slot record table (FOR ALL TABLES, FOR TABLES IN SCHEMA).
	ErrPublicationRecord = errors.New("publication publishes walrelay's slot record table")
	// ErrTableNotPublished: a table postgres.table lists (or walrelay
	// snapshot --table names) is in none of the configured publications.
	// The relay would never stream its rows, while retention, partition
	// upkeep and verify take it for an outbox.
	ErrTableNotPublished = errors.New("outbox table is not published")
)

// prepare checks the database before streaming: the slot (created when
// missing and allowed), the publications, and the columns the router needs
// in every published table. It seeds the tracker with the slot's confirmed
// position. With exactly-once delivery it first builds the transactional
// producer (delivery.connect), whose id needs the server's system
// identifier, and last creates the checkpoint topic.
func (r *Relay) prepare(ctx context.Context) error {
	conn, err := pgsession.Connect(ctx, r.cfg.Postgres.DSN)
	if err != nil {
		return fmt.Errorf("connecting to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// Before anything else: a standby's synchronized copy of the slot is
	// waited on until promotion (failoverslot.go); then a hot standby
	// decoded from must have its primary (standby.go).
	if err := r.waitSyncedCopy(ctx, conn); err != nil {
		return err
	}
	if err := r.checkStandby(ctx, conn); err != nil {
		return err
	}
	if err := r.delivery.connect(ctx, conn); err != nil {
		return err
	}

	confirmed, err := r.ensureSlot(ctx, conn)
	if err != nil {
		return err
	}
	r.tracker.SetStart(confirmed)
	if err := r.checkPublications(ctx, conn); err != nil {
		return err
	}
	if r.snap.needed {
		if err := r.checkSnapshot(ctx, conn, r.cfg.Snapshot.Where); err != nil {
			return err
		}
	}
	// Wrong credentials or certificates fail now, clearly, instead of as
	// a stream of retries; a broker that is merely down is retried.
	if err := r.pub.CheckAccess(ctx, 10*time.Second); err != nil {
		if errors.Is(err, publisher.ErrBrokerAccess) {
			return err
		}
		r.log.Warn("kafka brokers not reachable yet; records will wait for them", "err", err)
	}
	return r.delivery.prepareKafka(ctx)
}

// ensureSlot reads the slot with internal/postgres's query (the one `walrelay slot
// inspect` shows), creating it when it is missing and postgres.create_slot
// allows, and returns its confirmed_flush_lsn (0 for a slot not yet
// consistent).
func (r *Relay) ensureSlot(ctx context.Context, conn *pgx.Conn) (pglogrepl.LSN, error) {
	name := r.cfg.Postgres.Slot
	if err := r.decideFailover(ctx, conn); err != nil { // postgres.slot_failover
		return 0, err
	}
	if err := r.locateRecord(ctx, conn); err != nil {
		return 0, err
	}
	s, err := postgres.InspectSlot(ctx, conn, name)
	switch {
	case errors.Is(err, postgres.ErrSlotNotFound):
		// A slot walrelay confirmed through before is never created again
		// silently: the rows after its record may be unpublished.
		if err := r.rec.missing(ctx, conn); err != nil {
			if r.healOn() && errors.Is(err, slotrecord.ErrRecorded) {
				r.heal = &healPlan{what: healMissing, why: "the slot is missing"}
				r.log.Warn("replication slot missing after walrelay confirmed through it: healing it from the outbox (outbox.on_slot_loss: heal)", "slot", name)
				return 0, nil
			}
			return 0, fmt.Errorf("%w: %w", ErrSlotMissing, err)
		}
		if !r.cfg.Postgres.CreateSlot {
			return 0, fmt.Errorf("%w: %q (run `walrelay setup`, or set postgres.create_slot=true)", ErrSlotMissing, name)
		}
		if r.cfg.Snapshot.Initial() {
			// Created by the initial snapshot, once its rows are on Kafka
			// (initialSnapshot).
			r.snap.needed = true
			r.log.Info("replication slot missing: publishing the outbox's existing rows first (snapshot.mode=initial), then creating it", "slot", name, "where", r.cfg.Snapshot.Where)
			return 0, nil
		}
		if s, err = r.createSlot(ctx, conn, name); err != nil {
			return 0, fmt.Errorf("creating replication slot %q: %w", name, err)
		}
		r.log.Info("created replication slot", "slot", name, "lsn", s.ConfirmedFlushLSN, "failover", r.fslot.on)
		lsn, err := pglogrepl.ParseLSN(s.ConfirmedFlushLSN)
		if err != nil {
			return 0, fmt.Errorf("parsing confirmed_flush_lsn of slot %q: %w", name, err)
		}
		if err := r.rec.created(ctx, conn, lsn, "walrelay run (postgres.create_slot)"); err != nil {
			return 0, err
		}
	case err != nil:
		return 0, err
	default:
		db, err := postgres.CurrentDatabase(ctx, conn)
		if err != nil {
			return 0, err
		}
		if p := s.Problem(db); p != "" {
			return 0, fmt.Errorf("%w: %s", ErrSlotMismatch, p)
		}
		if err := r.ensureFailover(ctx, conn, s); err != nil {
			return 0, err
		}
		r.log.Info("found replication slot", "slot", name, "confirmed_flush_lsn", s.ConfirmedFlushLSN)
		if err := r.rec.found(ctx, conn); err != nil {
			return 0, err
		}
		if err := r.judgeSlot(s.WALStatus); err != nil {
			return 0, err
		}
		if r.heal != nil && !r.heal.inPlace {
			return 0, nil // created again by the heal
		}
	}
	if s.ConfirmedFlushLSN == "" {
		return 0, nil
	}
	lsn, err := pglogrepl.ParseLSN(s.ConfirmedFlushLSN)
	if err != nil {
		return 0, fmt.Errorf("parsing confirmed_flush_lsn of slot %q: %w", name, err)
	}
	return lsn, nil
}

// locateRecord refuses a slot record that is not where walrelay reads it
// (postgres.table's first table's schema) but in another listed table's
// schema: the list was reordered. It runs before the record is read or
// baselined (recorder.missing, recorder.found), which would otherwise take
// the record for missing and start the slot afresh without the proof it
// holds (a jump it recorded, the fence retention relies on). With one
// listed schema it reads nothing.
func (r *Relay) locateRecord(ctx context.Context, conn *pgx.Conn) error {
	pg := r.cfg.Postgres
	if len(pg.Schemas()) < 2 {
		return nil // no other schema to look in (and no connection to the primary yet)
	}
	w, err := r.rec.writer(ctx, conn)
	if err != nil {
		return err
	}
	if err := slotrecord.Locate(ctx, w, pg.RecordSchema(), pg.Schemas(), pg.Slot); err != nil {
		return fmt.Errorf("locating the record of slot %q: %w", pg.Slot, err)
	}
	return nil
}

// checkPublications reads the tables the configured publications publish,
// binds the router to each (r.tables, in schema and name order) and
// refuses what the relay cannot stream: a missing publication, partitions
// published under their own names, walrelay's record table, a table
// without the router's columns, and a table postgres.table lists that is
// not published (checkListed).
func (r *Relay) checkPublications(ctx context.Context, conn *pgx.Conn) error {
	pubs := r.cfg.Postgres.Publications
	var missing []string
	err := conn.QueryRow(ctx, `
		SELECT coalesce(array_agg(p), '{}') FROM unnest($1::text[]) p
		WHERE NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = p)`, pubs).Scan(&missing)
	if err != nil {
		return fmt.Errorf("reading publications: %w", err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %q (run `walrelay setup`, or fix postgres.publications)", ErrPublicationMissing, missing)
	}
	if err := checkPartitionRoot(ctx, conn, pubs); err != nil {
		return err
	}
	rows, err := conn.Query(ctx, `
		SELECT DISTINCT t.schemaname, t.tablename, c.oid::int8
		FROM pg_publication_tables t
		JOIN pg_namespace n ON n.nspname = t.schemaname
		JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = t.tablename
		WHERE t.pubname = ANY($1)
		ORDER BY 1, 2`, pubs)
	if err != nil {
		return fmt.Errorf("reading published tables: %w", err)
	}
	type table struct {
		schema, name string
		oid          int64
	}
	tables, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (table, error) {
		var t table
		return t, row.Scan(&t.schema, &t.name, &t.oid)
	})
	if err != nil {
		return fmt.Errorf("reading published tables: %w", err)
	}
	if len(tables) == 0 {
		r.log.Warn("the publications contain no table; nothing will be relayed", "publications", pubs)
	}
	oids := make([]uint32, len(tables))
	for i, t := range tables {
		oids[i] = uint32(t.oid)
	}
	cols, err := pgcatalog.ReadColumns(ctx, conn, oids)
	if err != nil {
		return err
	}
	r.tables = r.tables[:0]
	for _, t := range tables {
		if t.name == slotrecord.TableName {
			// Its writes (one every 100ms while the relay confirms) would
			// stream back to the relay as transactions of their own, which
			// it would confirm and record again, for ever.
			return fmt.Errorf("%w: %s.%s is in %q (a publication FOR ALL TABLES or FOR TABLES IN SCHEMA); publish only the outbox: CREATE PUBLICATION walrelay_outbox FOR TABLE %s, and set postgres.publications",
				ErrPublicationRecord, t.schema, t.name, pubs, strings.Join(r.cfg.Postgres.Table, ", "))
		}
		rel := router.Relation{ID: uint32(t.oid), Namespace: t.schema, Name: t.name, Columns: cols[uint32(t.oid)]}
		if _, err := r.router.Bind(rel); err != nil {
			return fmt.Errorf("checking outbox table against the router config: %w", err)
		}
		r.tables = append(r.tables, rel)
	}
	r.columns = cols
	return r.checkListed()
}

// checkListed compares postgres.table with the tables checkPublications
// bound. A listed table that no publication publishes is refused: its rows
// would never be streamed, while retention would prune them. A published
// table the list leaves out is streamed (as before the list existed),
// with a warning: retention, partition upkeep and verify leave it alone.
func (r *Relay) checkListed() error {
	listed := r.cfg.Postgres.Tables()
	names := make([]string, len(listed))
	for i, t := range listed {
		names[i] = t.String()
	}
	published := make([]string, len(r.tables))
	for i, rel := range r.tables {
		published[i] = rel.Namespace + "." + rel.Name
	}
	var missing, quoted []string
	for _, t := range listed {
		if !slices.Contains(published, t.String()) {
			missing = append(missing, t.String())
			quoted = append(quoted, t.Quoted())
		}
	}
	if len(missing) > 0 {
		pubs, pub := r.cfg.Postgres.Publications, "walrelay_outbox"
		if len(pubs) > 0 {
			pub = pubs[0] // the one setup creates and adds to
		}
		return fmt.Errorf("%w: postgres.table (%s) lists %s, which none of the publications %q publishes: ALTER PUBLICATION %s ADD TABLE %s; (or run `walrelay setup`, which adds the tables it lists)",
			ErrTableNotPublished, strings.Join(names, ", "), strings.Join(missing, ", "), pubs, pgx.Identifier{pub}.Sanitize(), strings.Join(quoted, ", "))
	}
	var unlisted []string
	for _, p := range published {
		if !slices.Contains(names, p) {
			unlisted = append(unlisted, p)
		}
	}
	if len(unlisted) > 0 {
		r.log.Warn("the publications publish tables postgres.table does not list: they are relayed, but retention, partition upkeep and verify leave them alone (list them in postgres.table, or drop them from the publication)",
			"tables", strings.Join(unlisted, ", "), "postgres.table", strings.Join(names, ", "), "publications", strings.Join(r.cfg.Postgres.Publications, ", "))
	}
	return nil
}

// checkPartitionRoot refuses publications that publish a partitioned
// table's partitions under their own names. Without
// publish_via_partition_root, pgoutput sends each row with its leaf
// partition's Relation (public.outbox_p20261125), a new relation every
// interval. The relay would route them (it binds every published relation
// that has the router's columns), but as tables of their own: dead letters
// and logs would name a partition instead of the outbox, the relay would
// keep a plan and a column cache entry per partition for as long as it
// streams, and `walrelay check` and retention reason about the root. One
// relation per outbox is the rule; the fix is one statement, so startup
// fails with it. Rows already in the slot from before the fix still arrive
// with their partition's relation (pgoutput decodes WAL with the catalog
// of its time) and are routed like any published relation, not lost.
func checkPartitionRoot(ctx context.Context, conn *pgx.Conn, pubs []string) error {
	var pub, table string
	err := conn.QueryRow(ctx, `
		SELECT p.pubname::text, t.schemaname || '.' || t.tablename
		FROM pg_publication p
		JOIN pg_publication_tables t ON t.pubname = p.pubname
		JOIN pg_namespace n ON n.nspname = t.schemaname
		JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = t.tablename
		WHERE p.pubname = ANY($1) AND NOT p.pubviaroot AND c.relispartition
		ORDER BY 1, 2 LIMIT 1`, pubs).Scan(&pub, &table)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("reading published partitions: %w", err)
	}
	return fmt.Errorf("%w: publication %q publishes partition %s under its own name, not its partitioned table's (publish_via_partition_root is off): ALTER PUBLICATION %s SET (publish_via_partition_root = true);",
		ErrPublicationLeaves, pub, table, pgx.Identifier{pub}.Sanitize())
}

// relationOf converts a Relation message for the router, with what the
// catalog says and pgoutput does not carry (NOT NULL, DEFAULT), when the
// router's converters use it. Like Debezium's PgOutputMessageDecoder, which
// reads them again on every Relation message, it reads the table's columns
// afresh (Postgres sends a Relation message at each session's start and
// after every ALTER TABLE), so schemas follow the table; if that read
// fails, it keeps what it read last and says so.
func (r *Relay) relationOf(ctx context.Context, rel *pglogrepl.RelationMessage) router.Relation {
	out := router.RelationOf(rel)
	if !r.router.NeedsCatalog() {
		return out
	}
	if err := r.rereadColumns(ctx, rel.RelationID); err != nil {
		r.log.Warn("could not read the outbox table's columns again; Connect schemas keep the NOT NULL and DEFAULT read before",
			"table", rel.Namespace+"."+rel.RelationName, "err", err)
	}
	return r.columns.Complete(out)
}

// rereadColumns reads one table's columns into r.columns, on a connection
// of its own.
func (r *Relay) rereadColumns(ctx context.Context, relid uint32) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgsession.Connect(ctx, r.cfg.Postgres.DSN)
	if err != nil {
		return postgres.ExplainConnectError(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	cols, err := pgcatalog.ReadColumns(ctx, conn, []uint32{relid})
	if err != nil {
		return err
	}
	if r.columns == nil {
		r.columns = pgcatalog.Columns{}
	}
	r.columns[relid] = cols[relid]
	return nil
}
