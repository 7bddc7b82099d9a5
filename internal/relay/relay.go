// Package relay wires walrelay together: it is the replication Handler
// that routes each outbox INSERT with the router, produces it with the
// publisher, and tracks it in the checkpoint so the stream confirms an LSN
// only once Kafka has acknowledged everything up to it.
//
// In: a validated config.Config. Out: records on Kafka and confirmed
// positions on the slot; Run returns nil after a clean stop and an error
// naming the cause otherwise.
//
// Its files, one role each:
//
//   - relay.go: New builds the parts; Run checks the database, then owns
//     the goroutines (stream, slot monitor, heartbeats, dead-letter worker)
//     until a stop or the first failure; with exactly-once delivery it
//     starts again in-process after a commit of unknown outcome or a
//     fence (restart). failure.go: the first error that stops it, and
//     the tracker as the stream sees it then.
//   - delivery.go: relay.delivery as a type (delivery), chosen once by
//     New: how a record reaches Kafka and when the tracker hears of it;
//     at-least-once there, exactly-once (transactions) in txn.go (the
//     loop putting records into Kafka transactions with a checkpoint)
//     and txnstart.go (the transactional producer, the fence, the
//     checkpoint topic, where a session starts from).
//   - prepare.go: the startup checks. The slot exists with plugin pgoutput
//     in this database, or is created; the publications exist and publish
//     partitioned tables through their root, and every table of
//     postgres.table (a published table it does not list is relayed, with
//     a warning); every column the router needs is in every published
//     table; the slot's record is in the first listed table's schema. A
//     bad config fails at startup, not at the first row. With exactly-once delivery it also builds the
//     transactional producer, whose id it derives from the server.
//   - handler.go: the replication.Handler, on the stream's goroutine:
//     transactions into the checkpoint, rows into records, sessions and
//     WAL histories (with package resume deciding what a reconnect re-sent).
//   - record.go: a record on its way to Kafka, its pool and its outcome
//     (the one promise every record shares); clock.go the clocks that stamp
//     records for latencies.
//   - avro.go: the avro converter's keys and values finished with the
//     schema registry (ids patched into Confluent's header from a
//     relay-local cache, or the payload's JSON encoded with the
//     subject's registered schema); a registry that is down is waited
//     for on the stream's goroutine, keeping the session alive
//     (replication.KeepAlive), a refusal is a schema_rejected row.
//   - policy.go: relay.on_error for rows and records walrelay cannot
//     publish as routed, and the dead-letter worker.
//   - status.go: /status, readiness and the gauges read at scrape time.
//   - snapshot.go: the initial snapshot (snapshot.mode=initial) and the
//     backfill of walrelay snapshot: rows read by internal/snapshot, handed to
//     the handler as one tracked transaction, waited for until acked.
//   - pgshutdown.go: Postgres shutting down while the relay streams: a
//     record that fails for it ends the replication session, so that the
//     walsender, which waits for the client's position, exits.
//   - takeover.go: SkipPublished, for taking over from a relay (Debezium)
//     that stopped inside a transaction.
//   - standby.go: decoding from a hot standby (postgres.primary_dsn): the
//     startup's checks of the standby, the slot's creation there (asking
//     the primary for running-transactions records), and what Ready says
//     while Postgres waits for one. Heartbeats and the slot record
//     (slotrecord.go) go to the primary.
//
// Rows walrelay cannot publish as routed follow relay.on_error, per class:
// the router's (routing_value_missing, topic_invalid, payload_invalid),
// the relay's (topic_invalid past relay.max_topics or outside
// relay.topic_pattern), the schema registry's (schema_rejected: a
// refused schema; payload_invalid: a payload that does not match the
// registered schema of avro.schema registry) and the publisher's verdicts on one record
// (record_too_large, topic_rejected, payload_invalid for a partition or
// timestamp Kafka cannot take). dlq publishes a dead letter (package
// deadletter), confirmed like any record once acknowledged; stop returns
// an error and the row's LSN is never confirmed; log skips it.
// Every one is logged with its LSN and outbox id. UPDATEs on the outbox
// follow table.op.invalid.behavior; DELETEs are ignored (insert-then-delete
// is the usual outbox practice). Any other record franz-go gives up on
// stops the relay.
//
// It does not parse pgoutput, talk the Kafka protocol, compute watermarks,
// poll the slot or emit heartbeats: those are internal/replication,
// internal/publisher, internal/checkpoint, internal/slotmon and internal/heartbeat.
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"golang.org/x/sync/errgroup"

	"github.com/walrelay/walrelay/internal/checkpoint"
	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/dbzoffset"
	"github.com/walrelay/walrelay/internal/heartbeat"
	"github.com/walrelay/walrelay/internal/kafkaconf"
	"github.com/walrelay/walrelay/internal/metrics"
	"github.com/walrelay/walrelay/internal/pgcatalog"
	"github.com/walrelay/walrelay/internal/publisher"
	"github.com/walrelay/walrelay/internal/replication"
	"github.com/walrelay/walrelay/internal/router"
	"github.com/walrelay/walrelay/internal/slotmon"
	"github.com/walrelay/walrelay/internal/slotrecord"
)

// Relay moves outbox events from one slot to Kafka. Create it with New and
// call Run once.
type Relay struct {
	cfg     config.Config
	log     *slog.Logger
	router  *router.Router
	tracker *checkpoint.Tracker
	// pub is the Kafka producer: built by New, or, with exactly-once
	// delivery, whose transactional id needs the server's system
	// identifier, by prepare, before anything is produced. pubShared is it
	// for the goroutines that may look before then (scrapes).
	pub       *publisher.Publisher
	pubShared atomic.Pointer[publisher.Publisher]
	pubCfg    publisher.Config
	stream    *replication.Stream
	metrics   *metrics.Metrics
	monitor   *slotmon.Monitor
	fail      failure
	// deadLetters feeds runDeadLetters; its capacity is the in-flight cap,
	// so a promise never blocks on it.
	deadLetters chan deadLetterJob
	// deadLettersPublished is events_published_total of the dead-letter
	// topic.
	deadLettersPublished prometheus.Counter
	hb                   *heartbeat.Emitter
	records              recordPool
	clock                monoClock   // stamps records handed to the producer
	abandoned            abandonment // records a timed-out shutdown gave up on
	// delivery is relay.delivery (delivery.go): atLeastOnce, or
	// transactions (exactly_once), which puts records into Kafka
	// transactions; kafkaTxns are their counts.
	delivery  delivery
	kafkaTxns txnCounts
	// started is AfterStartup's function, or nil.
	started func()
	// columns holds the published tables' columns as the catalog describes
	// them: read at startup (prepare), then, table by table, on the
	// stream's goroutine at each Relation message (relationOf).
	columns pgcatalog.Columns
	// tables are the published tables as prepare bound them, ordered by
	// schema and name, in the catalog's column order (what a snapshot
	// reads).
	tables []router.Relation
	// handler is the stream's handler; a snapshot hands its rows to it
	// before the stream starts.
	handler *handler
	// snap is the initial snapshot's state (snapshot.go).
	snap snapshotState
	// fslot is the failover slot's state (failoverslot.go).
	fslot failoverState
	// newOpts are New's options, to build the relay again (restart).
	newOpts []Option
	// live is the relay Run started again in-process last (restart); nil
	// before the first restart. Status, Ready, Tracker and SnapshotStatus
	// report it.
	live atomic.Pointer[Relay]
	// rec is walrelay's record of the slot: the stream confirms at most
	// what it recorded (slotrecord.go).
	rec *recorder
	// standby is decoding from a standby (standby.go).
	standby standbyState
	// heal, set by prepare, is the heal of a lost slot to run before
	// streaming (heal.go).
	heal *healPlan
	// avro finishes the avro converter's keys and values with the schema
	// registry (avro.go); nil when neither side is avro.
	avro *avroStage
}

// Option configures a Relay beyond its config.
type Option func(*options)

type options struct {
	version      string // Version
	largeMessage func(n int)
	published    *dbzoffset.Open // SkipPublished
	started      func()          // AfterStartup
}

// AfterStartup has fn called on Run's goroutine when the startup checks
// passed and streaming is about to begin (again after each in-process
// restart, see Run): walrelay run starts its partition maintainer then,
// so that a database it cannot reach or a configuration it refuses is
// reported by the relay's one error alone.
func AfterStartup(fn func()) Option {
	return func(o *options) { o.started = fn }
}

// Version is the running walrelay's version, which the schema registry
// clients send in their User-Agent (walrelay/<version>).
func Version(v string) Option {
	return func(o *options) { o.version = v }
}

// OnLargeMessage has fn called, on the stream's goroutine, with the size
// of a message from the slot larger than the standard receive buffer
// (512 KiB), before walrelay reads it into memory: the relay may hold
// that much (and copies of it, up to three) beyond its in-flight caps.
// walrelay run raises Go's soft memory limit with it.
func OnLargeMessage(fn func(n int)) Option {
	return func(o *options) { o.largeMessage = fn }
}

// New validates cfg and builds the relay. It does not connect: with
// exactly-once delivery the Kafka producer, whose transactional id is
// derived from the Postgres server, is built at startup (Run). m may be
// nil (metrics are then kept on a private registry nobody scrapes).
func New(cfg config.Config, log *slog.Logger, m *metrics.Metrics, opts ...Option) (*Relay, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rt, err := router.New(cfg.Router, cfg.Converter)
	if err != nil {
		return nil, fmt.Errorf("configuring router: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for _, in := range rt.Inert() {
		log.Warn("router option has no effect in walrelay", "option", in.Option, "value", in.Value, "why", in.Reason)
	}
	if m == nil {
		m = metrics.New(prometheus.NewRegistry(), "unknown", cfg.Postgres.Slot)
	}
	r := &Relay{
		cfg:     cfg,
		log:     log,
		router:  rt,
		metrics: m,
		tracker: checkpoint.New(checkpoint.Limits{
			MaxRecords: cfg.Relay.MaxInFlightRecords,
			MaxBytes:   cfg.Relay.MaxInFlightBytes,
		}),
		fail:                 failure{done: make(chan struct{})},
		deadLetters:          make(chan deadLetterJob, cfg.Relay.MaxInFlightRecords+1),
		deadLettersPublished: m.Published(cfg.Relay.DeadLetterTopic),
		clock:                newMonoClock(),
		hb:                   heartbeat.New(cfg.Postgres.Primary(), cfg.Postgres.Slot, cfg.Relay.HeartbeatInterval, log),
	}
	if r.pubCfg, err = kafkaconf.PublisherConfig(cfg.Kafka, kafkaconf.Options{Registry: m.Registerer(), Log: log}); err != nil {
		return nil, err
	}
	r.pubCfg.Done = r.onProduced
	r.pubCfg.MaxBufferedRecords = 2*cfg.Relay.MaxInFlightRecords + 1 // records plus their dead-letter copies
	if cfg.Relay.ExactlyOnce() {
		// The producer's transactional id is derived from the server's
		// system identifier: prepare builds it (newPublisher) once
		// connected.
		opts, err := kafkaconf.ClientOpts(cfg.Kafka, kafkaconf.Options{DialTimeout: kafkaconf.ShortDial})
		if err != nil {
			return nil, err
		}
		r.delivery = newTransactions(r, opts)
	} else {
		pub, err := r.newPublisher("")
		if err != nil {
			return nil, err
		}
		r.delivery = newAtLeastOnce(r, pub)
	}
	if r.avro, err = newAvro(rt, m, log, o.version); err != nil {
		return nil, err
	}
	r.started = o.started
	r.newOpts = opts
	r.rec = newRecorder(r, slotrecord.Table{Schema: cfg.Postgres.RecordSchema()})
	h := newHandler(r)
	h.skip.p = o.published
	if err := h.bindMessages(cfg.Outbox.MessagePrefix); err != nil {
		return nil, err
	}
	r.handler = h
	r.stream, err = replication.New(replication.Config{
		DSN:             cfg.Postgres.DSN,
		Slot:            cfg.Postgres.Slot,
		Publications:    cfg.Postgres.Publications,
		StatusInterval:  cfg.Postgres.StatusInterval,
		ShutdownTimeout: cfg.Relay.ShutdownTimeout,
		MinBackoff:      cfg.Postgres.MinBackoff,
		MaxBackoff:      cfg.Postgres.MaxBackoff,
		ReadWait:        cfg.Postgres.ReadWait,
		LargeMessage:    o.largeMessage,
	}, h, failureAware{Tracker: r.tracker, fail: &r.fail, rec: r.rec}, log)
	if err != nil {
		return nil, err
	}
	r.rec.endSession = r.stream.EndSession // Postgres shutting down (pgshutdown.go)
	r.monitor = slotmon.New(cfg.Postgres.DSN, cfg.Postgres.Slot, cfg.Metrics.SlotPollInterval, m, log)
	r.monitor.OwnWAL(r.rec.ownTail) // an idle slot behind only its own record is not stalled
	r.registerGauges()
	// Create the error series now, at 0, so that increase() sees the
	// first error of each kind.
	for _, class := range router.OnErrorClasses() {
		policy, _ := cfg.Relay.OnError.Policy(class)
		m.RowsRejected.WithLabelValues(class.String(), policy)
		m.PublishErrors.WithLabelValues(class.String())
	}
	m.PublishErrors.WithLabelValues("produce")
	for _, t := range cfg.Postgres.Tables() {
		m.OutboxTables(t.String()) // retention's series, one per listed table, at 0
	}
	return r, nil
}

// newAvro builds the schema registry clients of the avro converters
// (kafkaconf.Registries) and the stage that uses them, or returns nil
// when neither side is avro: no client, no registry metrics.
func newAvro(rt *router.Router, m *metrics.Metrics, log *slog.Logger, version string) (*avroStage, error) {
	_, keyAvro := rt.Avro(true)
	if _, valueAvro := rt.Avro(false); !keyAvro && !valueAvro {
		return nil, nil
	}
	if version == "" {
		version = "unknown"
	}
	hooks := m.SchemaRegistry()
	key, value, err := kafkaconf.Registries(rt, kafkaconf.RegistryOptions{
		UserAgent: "walrelay/" + version, Hooks: hooks, Log: log.With("component", "schema-registry")})
	if err != nil {
		return nil, err
	}
	return newAvroStage(key, value, rt.Config(), hooks), nil
}

// newPublisher builds the Kafka producer, transactional with txnID when it
// is not "".
func (r *Relay) newPublisher(txnID string) (*publisher.Publisher, error) {
	cfg := r.pubCfg
	cfg.TransactionalID = txnID
	p, err := publisher.New(cfg, r.log)
	if err != nil {
		return nil, err
	}
	r.pub = p
	r.pubShared.Store(p)
	return p, nil
}

// Tracker exposes the checkpoint (for status and metrics) of the relay
// running now.
func (r *Relay) Tracker() *checkpoint.Tracker { return r.current().tracker }

// current is the relay running now: r, or the one Run started again
// in-process last.
func (r *Relay) current() *Relay {
	if l := r.live.Load(); l != nil {
		return l
	}
	return r
}

// fenceWindow is how soon after a fence a second one means two live
// processes: Run then returns ErrFenced instead of starting again. A
// process that starts again fences only once it holds the slot
// (SessionStreaming), so a zombie woken after a takeover becomes a
// standby and is not fenced again while the active process holds the
// slot; two fences within minutes mean two processes taking the slot from
// each other, which an operator must stop. A fence after a broker
// restart (kfake's crash recovery bumps epochs) happens once.
const fenceWindow = 5 * time.Minute

// Run checks the database, then streams until ctx is done (returns nil
// after draining in-flight records and confirming them) or until an error
// stops the relay (returns it; nothing unacknowledged is confirmed). A ctx
// done during the startup checks is a clean stop too: nothing was read. It
// closes the Kafka client when it returns.
//
// With exactly-once delivery, two errors start the relay again
// in-process instead (restart): a Kafka commit whose outcome is unknown,
// and a fence not preceded by another within fenceWindow (a second one is
// returned, wrapping ErrFenced).
func (r *Relay) Run(ctx context.Context) error {
	cur, lastFence, failed := r, time.Time{}, 0
	for {
		committed := cur.kafkaTxns.committed.Load() // before this start
		err := cur.run(ctx)
		var why string
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errCommitUnknown):
			if ctx.Err() != nil {
				return nil // stopping anyway: the next start resolves it
			}
			why = "the outcome of a kafka commit is unknown"
		case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
			return err // the ACLs, not another process: starting again cannot help
		case errors.Is(err, ErrFenced):
			if ctx.Err() != nil {
				return err
			}
			at := time.Now()
			if !lastFence.IsZero() && at.Sub(lastFence) < fenceWindow {
				r.log.Error("fenced again soon after the last fence: another walrelay process is live with this transactional id; stopping",
					"previous_fence", lastFence.Format(time.RFC3339), "fence_window", fenceWindow.String(), "err", err)
				return err
			}
			lastFence = at
			why = "fenced"
		default:
			return err
		}
		if cur.kafkaTxns.committed.Load() > committed {
			failed = 0 // this start committed: not a restart loop
		}
		wait := min(time.Second<<min(failed, 5), 30*time.Second)
		failed++
		r.log.Warn("restarting the exactly-once pipeline in-process: a new kafka client fences the transactional id and the checkpoint says what was committed; nothing more was confirmed",
			"reason", why, "retry_in", wait.String(), "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		next, err := r.restart(cur)
		if err != nil {
			return err
		}
		cur = next
	}
}

// restart builds the relay again from New's arguments, as a new process
// would: a new Kafka client (the stopped one is closed), a new stream,
// tracker and checkpoint state. Its gauges replace prev's on the metrics
// registry; the Kafka transaction counts carry on. This is the start
// path every process takes: fence the transactional id (the new
// producer's InitProducerID makes the coordinator finish what prev left:
// the pending commit completes or the transaction aborts), read the
// checkpoint, and stream the slot from its confirmed position, skipping
// what the checkpoint covers. Resolving an unknown commit this way needs
// nothing but the proven start: no checkpoint is compared by sequence,
// and nothing prev held in memory is trusted.
func (r *Relay) restart(prev *Relay) (*Relay, error) {
	next, err := New(r.cfg, r.log, r.metrics, r.newOpts...)
	if err != nil {
		return nil, fmt.Errorf("starting the relay again: %w", err)
	}
	next.kafkaTxns.carryOn(&prev.kafkaTxns)
	r.live.Store(next)
	return next, nil
}

// run is one start of the relay: Run's work, until a stop or an error.
func (r *Relay) run(ctx context.Context) error {
	defer r.closePublisher()
	defer r.avro.close()
	defer r.rec.close() // the startup may have opened its connections (decoding from a standby)
	if err := r.prepare(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // asked to stop while starting (SIGTERM)
		}
		return err
	}
	var g errgroup.Group
	// The dead-letter worker outlives streamCtx: the shutdown drain waits
	// for dead-letter copies too. It runs during the initial snapshot.
	dlqCtx, stopDLQ := context.WithCancel(context.WithoutCancel(ctx))
	defer stopDLQ()
	g.Go(func() error {
		r.runDeadLetters(dlqCtx)
		return nil
	})
	// The delivery's own goroutine too (exactly-once delivery's
	// transaction loop): the drain waits for commits, and a heal
	// publishes through it.
	txnCtx, stopTxns := context.WithCancel(context.WithoutCancel(ctx))
	defer stopTxns()
	g.Go(func() error {
		r.delivery.run(txnCtx)
		return nil
	})
	// failedBefore stops what runs and returns what ended a step before
	// streaming (the initial snapshot, the heal): the pipeline's own
	// failure first, nil for a stop (saying so), else err.
	failedBefore := func(err error, stopped string) error {
		stopDLQ()
		stopTxns()
		_ = g.Wait()
		if ferr := r.fail.err(); ferr != nil {
			return ferr
		}
		if ctx.Err() != nil {
			r.log.Info(stopped)
			return nil
		}
		return err
	}
	if r.snap.needed {
		if err := r.initialSnapshot(ctx); err != nil {
			return failedBefore(err, "stopped during the initial snapshot; no slot was created, the next start snapshots again")
		}
	}
	if r.heal != nil {
		if _, err := r.healSlot(ctx); err != nil {
			return failedBefore(err, "stopped during the heal of the slot; the next start heals again")
		}
	}
	if r.started != nil {
		r.started()
	}

	streamCtx, stop := context.WithCancel(ctx)
	defer stop()
	g.Go(func() error {
		// A failed record stops reading at once; the stream then skips the
		// drain (failure-aware WaitDrained) and reports what is confirmed.
		select {
		case <-r.fail.done:
			stop()
		case <-streamCtx.Done():
		}
		return nil
	})
	g.Go(func() error {
		r.sayStopping(ctx, streamCtx)
		return nil
	})
	g.Go(func() error {
		r.monitor.Run(streamCtx)
		return nil
	})
	if r.cfg.Relay.HeartbeatInterval > 0 {
		r.hb.While(r.stream.Streaming) // a standby neither emits nor waits
		g.Go(func() error {
			r.hb.Run(streamCtx)
			return nil
		})
	}
	// The slot record's writer outlives streamCtx too: the drain
	// confirms, and so records, what it waits for.
	recCtx, stopRec := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRec()
	g.Go(func() error {
		r.rec.run(recCtx)
		return nil
	})
	err := r.stream.Run(streamCtx)
	stopRec()
	stop()
	stopDLQ()
	stopTxns()
	_ = g.Wait() // both goroutines end with streamCtx
	if ferr := r.fail.err(); ferr != nil {
		return ferr
	}
	return err
}

// closePublisher closes the Kafka client. Records it still held (a
// shutdown whose relay.shutdown_timeout expired, or a stop on an error)
// were never confirmed: one line says how many and from where Postgres
// sends them again.
func (r *Relay) closePublisher() {
	if r.pub == nil {
		return // exactly-once: the startup stopped before building it
	}
	r.pub.Close()
	for len(r.deadLetters) > 0 { // dead letters the stopped worker did not produce
		r.abandoned.add((<-r.deadLetters).letter.Origin.LSN)
	}
	if n, first, last := r.abandoned.get(); n > 0 {
		r.log.Warn("closed the kafka client with records not yet acknowledged; they were not confirmed and Postgres sends them again to the next session",
			"records", n, "first_lsn", first.String(), "last_lsn", last.String(), "confirmed_lsn", r.tracker.Confirmed().String())
	}
}
