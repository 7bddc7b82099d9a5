package relay

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/walrelay/walrelay/internal/avrojson"
	"github.com/walrelay/walrelay/internal/connect/avro"
	"github.com/walrelay/walrelay/internal/kafkaconf"
	"github.com/walrelay/walrelay/internal/replication"
	"github.com/walrelay/walrelay/internal/router"
	"github.com/walrelay/walrelay/internal/schemareg"
)

// This file finishes what the avro converter wrote, which the router
// cannot (it does no I/O): the schema id in Confluent's header, from the
// schema registry, and, with converter.<side>.avro.schema registry, the
// Avro body encoded from the payload's JSON with the subject's registered
// schema (docs/design/avro.md 5.1, 5.5 steps 4, 6, 7 and 9).
//
// A registry that is down, slow or refuses the credentials is
// backpressure: the stream's goroutine waits (keeping the session alive,
// replication.KeepAlive) and reads nothing, Postgres keeps the WAL, and
// nothing after the rows already handed on is confirmed. A registry that
// refuses the schema (schemareg.ErrRejected) is a schema_rejected row
// error, handled by relay.on_error like any other row error.

// keepAliveEvery is how often the stream's goroutine, while it waits for
// the registry, lets replication.KeepAlive report status (which sends only
// what is due: a position an ack moved, or the status interval's update).
const keepAliveEvery = 100 * time.Millisecond

// avroStage finishes Avro keys and values. It runs on the stream's
// goroutine (and a snapshot's, before the stream starts): its caches are
// plain maps.
type avroStage struct {
	key, value *avroSide // nil for a side that is not avro
	// ids caches the registry's id per routed topic, side and interned
	// schema: the steady state is one map read per side, no allocation.
	ids map[avroIDKey]int32
	// schemas caches item 3's registered schemas per subject and version
	// (latestRecheck for the latest), so that a row whose schema is known
	// asks nothing of the client (whose own cache keeps the latest for
	// schemareg.Config.LatestTTL); codecs their compiled codecs by id.
	schemas map[avroVersionKey]avroRegistered
	codecs  map[int32]*avrojson.Codec
	// hooks count the ids served from ids as cache hits
	// (schema_registry_cache_hits_total, as the client's own hits).
	hooks schemareg.Hooks
}

// avroSide is one side's settings.
type avroSide struct {
	kafkaconf.RegistrySide
	isKey  bool
	column string // the outbox column the side's bytes come from, for row errors
}

type avroIDKey struct {
	topic  string
	isKey  bool
	schema *avro.Schema
}

type avroVersionKey struct {
	topic   string
	isKey   bool
	version int32 // 0: the latest
}

type avroRegistered struct {
	subject string
	reg     schemareg.Registered
	codec   *avrojson.Codec
	at      time.Time // when the client answered (the latest is asked again after latestRecheck)
}

// maxCachedIDs bounds the relay's id cache: schemas that vary per row
// (table.expand.json.payload) would otherwise grow it without end.
const maxCachedIDs = 1 << 16

// latestRecheck is how long a subject's latest schema is used before the
// client is asked again (its own cache answers until its LatestTTL ends:
// a new latest version is used at most this much later than the client
// sees it).
const latestRecheck = time.Second

// newAvroStage returns the stage for the avro sides, or nil when neither
// side is avro (the relay then never looks at a Message's AvroRefs).
func newAvroStage(key, value *kafkaconf.RegistrySide, rc router.Config, hooks schemareg.Hooks) *avroStage {
	if key == nil && value == nil {
		return nil
	}
	a := &avroStage{ids: make(map[avroIDKey]int32), codecs: make(map[int32]*avrojson.Codec),
		schemas: make(map[avroVersionKey]avroRegistered), hooks: hooks}
	if key != nil {
		a.key = &avroSide{RegistrySide: *key, isKey: true, column: rc.FieldEventKey}
	}
	if value != nil {
		a.value = &avroSide{RegistrySide: *value, column: rc.FieldEventPayload}
	}
	return a
}

// waiting reports whether the stream waits for a registry now. Nil-safe.
func (a *avroStage) waiting() bool {
	if a == nil {
		return false
	}
	for _, s := range []*avroSide{a.key, a.value} {
		if s != nil && s.Client != nil && s.Client.Waiting() {
			return true
		}
	}
	return false
}

// close releases the registry clients' idle connections. Nil-safe.
func (a *avroStage) close() {
	if a == nil {
		return
	}
	for _, s := range []*avroSide{a.key, a.value} {
		if s != nil {
			s.Client.Close() // idempotent: key and value may share it
		}
	}
}

// finish completes out's key and value as m's AvroRefs say. An error is a
// *router.RowError (schema_rejected, payload_invalid) for the row, or
// what ended the wait (the stream's context done, the session lost) for
// the stream.
func (a *avroStage) finish(ctx context.Context, out *outRecord, m *router.Message) error {
	topic := out.rec.Topic
	var (
		scratch          = out.avroBuf[:0]
		keyEnc, valueEnc bool
		k0, k1, v0, v1   int
		err              error
	)
	if ref := m.KeyAvro; !ref.IsZero() && a.key != nil {
		if ref.Registry {
			k0 = len(scratch)
			if scratch, err = a.encode(ctx, scratch, a.key, topic, ref, out.rec.Key); err != nil {
				return err
			}
			k1, keyEnc = len(scratch), true
		} else if err := a.patch(ctx, a.key, topic, ref.Schema, out.rec.Key); err != nil {
			return err
		}
	}
	if ref := m.ValueAvro; !ref.IsZero() && a.value != nil {
		if ref.Registry {
			v0 = len(scratch)
			if scratch, err = a.encode(ctx, scratch, a.value, topic, ref, out.rec.Value); err != nil {
				return err
			}
			v1, valueEnc = len(scratch), true
		} else if err := a.patch(ctx, a.value, topic, ref.Schema, out.rec.Value); err != nil {
			return err
		}
	}
	// Sliced once both are written: the second append may have moved the
	// scratch buffer.
	out.avroBuf = scratch
	if keyEnc {
		out.rec.Key = scratch[k0:k1:k1]
	}
	if valueEnc {
		out.rec.Value = scratch[v0:v1:v1]
	}
	return nil
}

// patch writes the registry's id for schema into b's header.
func (a *avroStage) patch(ctx context.Context, side *avroSide, topic string, schema *avro.Schema, b []byte) error {
	if len(b) < avro.HeaderSize || b[0] != 0 {
		return fmt.Errorf("avro %s of topic %q: %d bytes without Confluent's header", side.name(), topic, len(b))
	}
	id, err := a.id(ctx, side, topic, schema)
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint32(b[1:avro.HeaderSize], uint32(id))
	return nil
}

// id returns the registry's id for schema under the subject of topic and
// side: from the cache, or from the registry (waiting for it).
func (a *avroStage) id(ctx context.Context, side *avroSide, topic string, schema *avro.Schema) (int32, error) {
	k := avroIDKey{topic: topic, isKey: side.isKey, schema: schema}
	if id, ok := a.ids[k]; ok {
		a.hooks.CacheHit()
		return id, nil
	}
	subject, err := side.Strategy.Subject(topic, side.isKey, schema)
	if err != nil {
		// The serializer throws here too (RecordNameStrategy.getRecordName):
		// the registry cannot take this schema under this strategy.
		return 0, &router.RowError{Class: router.ClassSchemaRejected, Column: side.column, Err: err}
	}
	var id int32
	err = wait(ctx, func(ctx context.Context) (err error) {
		id, err = side.Client.ID(ctx, subject, schema.String(), side.Mode)
		return err
	})
	if err != nil {
		return 0, side.rowError(err)
	}
	if len(a.ids) >= maxCachedIDs {
		clear(a.ids) // the client's cache answers the next misses without a request
	}
	a.ids[k] = id
	return id, nil
}

// encode appends Confluent's header and the Avro body of the JSON document
// js, encoded with the schema registered under topic's subject for side
// (ref.Version, 0: the latest), to dst.
func (a *avroStage) encode(ctx context.Context, dst []byte, side *avroSide, topic string, ref router.AvroRef, js []byte) ([]byte, error) {
	vk := avroVersionKey{topic: topic, isKey: side.isKey, version: ref.Version}
	e, ok := a.schemas[vk]
	if ok && (ref.Version != 0 || time.Since(e.at) < latestRecheck) {
		a.hooks.CacheHit()
	} else {
		subject, err := side.Strategy.Subject(topic, side.isKey, nil) // TopicNameStrategy: kafkaconf.Registries refuses the others
		if err != nil {
			return dst, &router.RowError{Class: router.ClassSchemaRejected, Column: side.column, Err: err}
		}
		var reg schemareg.Registered
		err = wait(ctx, func(ctx context.Context) (err error) {
			reg, err = side.Client.Schema(ctx, subject, ref.Version)
			return err
		})
		if err != nil {
			return dst, side.rowError(err)
		}
		codec, ok := a.codecs[reg.ID]
		if !ok {
			if codec, err = avrojson.Compile(reg.Text); err != nil {
				return dst, &router.RowError{Class: router.ClassSchemaRejected, Column: side.column,
					Err: fmt.Errorf("the schema registered under subject %q (version %d, id %d) cannot encode JSON: %w", subject, reg.Version, reg.ID, err)}
			}
			a.codecs[reg.ID] = codec
		}
		e = avroRegistered{subject: subject, reg: reg, codec: codec, at: time.Now()}
		a.schemas[vk] = e
	}
	subject, reg, codec := e.subject, e.reg, e.codec
	n := len(dst)
	dst = append(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(reg.ID))
	dst, err := codec.AppendJSON(dst, js)
	if err != nil {
		var fe *avrojson.FieldError
		if errors.As(err, &fe) {
			return dst[:n], &router.RowError{Class: router.ClassPayloadInvalid, Column: side.column,
				Err: fmt.Errorf("the %s does not match the schema registered under subject %q (version %d, id %d): %w", side.name(), subject, reg.Version, reg.ID, err)}
		}
		return dst[:n], err
	}
	return dst, nil
}

// waitEnded is publish's error when the wait for the registry ended
// without an answer for the row (the stream stopping, its session lost):
// not the row's error, so relay.on_error does not apply; the row is read
// again (nothing after it was confirmed).
type waitEnded struct{ err error }

func (e *waitEnded) Error() string { return e.err.Error() }
func (e *waitEnded) Unwrap() error { return e.err }

// rowError turns a registry refusal into a schema_rejected row error;
// any other error (the wait ended) is returned as is.
func (s *avroSide) rowError(err error) error {
	if errors.Is(err, schemareg.ErrRejected) {
		return &router.RowError{Class: router.ClassSchemaRejected, Column: s.column, Err: err}
	}
	return err
}

func (s *avroSide) name() string {
	if s.isKey {
		return "key"
	}
	return "value"
}

// wait runs call, which may wait for the registry as long as it is down,
// on a goroutine of its own while the caller's (the stream's) keeps the
// replication session alive (replication.KeepAlive, a no-op outside the
// stream) and reads nothing. It returns call's error, or KeepAlive's (the
// session is lost: call is stopped and waited for).
func wait(ctx context.Context, call func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	t := time.NewTicker(keepAliveEvery)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-t.C:
			if err := replication.KeepAlive(ctx); err != nil {
				cancel()
				<-done
				return err
			}
		}
	}
}
