package schemareg

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/sr"
)

// Registered is a schema as the registry holds it under a subject.
type Registered struct {
	Subject    string
	ID         int32
	Version    int
	Text       string      // the schema's JSON text as the registry stores it
	References []Reference // named types of other subjects the schema uses
}

// Reference is a schema reference: the named type Name is the schema of
// Subject at Version.
type Reference struct {
	Name    string
	Subject string
	Version int
}

// Schema returns subject's schema at version, or its latest with version 0,
// for encoding JSON payloads with the registered schema (issue 36 item 3).
// A version is cached for the client's life (the registry never changes
// it); the latest for Config.LatestTTL, after which the next call asks the
// registry again. While the registry is unavailable or refuses the
// credentials, Schema waits as ID does, except that an expired latest is
// refreshed with one attempt only: if that fails, the cached latest is
// served for another LatestTTL (the stream goes on while no new schema is
// needed; the failure is logged as ID's are). A refusal (404: no such
// subject or version) is a *RejectedError.
func (c *Client) Schema(ctx context.Context, subject string, version int32) (Registered, error) {
	if version < 0 {
		return Registered{}, fmt.Errorf("schema registry: subject %q: version %d: want 0 (the latest) or a version", subject, version)
	}
	k := verKey{subject, version}
	e, ok := (*c.schemas.Load())[k]
	if ok && (version != 0 || time.Since(e.fetched) < c.latestTTL) {
		c.hooks.CacheHit()
		return e.reg, nil
	}
	c.hooks.CacheMiss()
	op := "version"
	if version == 0 {
		op = "latest"
	}
	return c.schemaCalls.do(ctx, k, func() (Registered, error) {
		if e, ok := (*c.schemas.Load())[k]; ok && (version != 0 || time.Since(e.fetched) < c.latestTTL) {
			return e.reg, nil // a call just ended
		}
		fetch := func() (Registered, error) { return c.fetchSchema(ctx, subject, version, op) }
		stale, haveStale := (*c.schemas.Load())[k]
		if !haveStale {
			return c.fetchAndStore(ctx, k, op, fetch)
		}
		// An expired latest: one attempt; the cached one stays while the
		// registry is unavailable.
		reg, err := fetch()
		class, status, re := classify(err)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return Registered{}, waitError(ctx, op, subject, err)
		case class == ClassRejected:
			c.hooks.Error(class)
			if re == nil { // refused here (not Avro)
				return Registered{}, err
			}
			return Registered{}, rejected(subject, op, re)
		default:
			c.hooks.Error(class)
			c.logWait(class, op, subject, status, err, 0)
			reg = stale.reg // served for another LatestTTL
		}
		c.storeSchema(k, reg)
		return reg, nil
	}, func() error { return waitError(ctx, op, subject, nil) })
}

// fetchAndStore fetches with retries and caches the answer.
func (c *Client) fetchAndStore(ctx context.Context, k verKey, op string, fetch func() (Registered, error)) (Registered, error) {
	reg, err := retry(ctx, c, op, k.subject, fetch)
	if err != nil {
		return Registered{}, err
	}
	c.storeSchema(k, reg)
	return reg, nil
}

// fetchSchema makes one attempt at subject's schema at version (0: the
// latest): GET /subjects/{s}/versions/{v|latest}.
func (c *Client) fetchSchema(ctx context.Context, subject string, version int32, op string) (Registered, error) {
	v := int(version)
	if v == 0 {
		v = -1
	}
	var ss sr.SubjectSchema
	err := c.call(op, func() (err error) {
		ss, err = c.cl.SchemaByVersion(ctx, subject, v)
		return err
	})
	if err != nil {
		return Registered{}, err
	}
	if ss.Type != sr.TypeAvro {
		return Registered{}, &RejectedError{Subject: subject, Op: op, Message: fmt.Sprintf("version %d (id %d) is a %s schema, not Avro", ss.Version, ss.ID, ss.Type)}
	}
	reg := Registered{Subject: subject, ID: int32(ss.ID), Version: ss.Version, Text: ss.Schema.Schema}
	for _, r := range ss.References {
		reg.References = append(reg.References, Reference{Name: r.Name, Subject: r.Subject, Version: r.Version})
	}
	return reg, nil
}

// storeSchema caches reg under k (fetched now).
func (c *Client) storeSchema(k verKey, reg Registered) {
	c.schemaMu.Lock()
	defer c.schemaMu.Unlock()
	old := *c.schemas.Load()
	next := make(map[verKey]*schemaEntry, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[k] = &schemaEntry{reg: reg, fetched: time.Now()}
	c.schemas.Store(&next)
}

// anyName accepts every name: the registry, not this client, decides which
// names are valid (Apache Avro's Java parser checks simple names but not
// namespace segments, docs/design/avro.md §0.10).
func anyName() avro.SchemaOpt { return avro.WithLaxNames(func(string) error { return nil }) }

// sameEncoding reports why a record walrelay writes with schema would not
// be the bytes the latest version describes, or nil when it would:
// use.latest.version puts the latest version's id in front of a body
// walrelay encodes with the schema AvroData derives, so the two must
// encode alike — the same Parsing Canonical Form (the same names, fields
// in the same order, the same types; docs, defaults and properties aside).
// Confluent's serializer writes with the latest version instead, reading
// the record's fields by position (GenericData.getField), and fails or
// writes other bytes when they differ; walrelay refuses rather than
// label a body with a schema that would decode it wrong.
func sameEncoding(latest, schema string) error {
	l, err := avro.Parse(latest, anyName())
	if err != nil {
		return fmt.Errorf("parsing the latest version: %w", err)
	}
	w, err := avro.Parse(schema, anyName())
	if err != nil {
		return fmt.Errorf("parsing the schema: %w", err)
	}
	if lc, wc := l.Canonical(), w.Canonical(); !bytes.Equal(lc, wc) {
		return fmt.Errorf("its Parsing Canonical Form %s differs from the schema's %s", cut(lc), cut(wc))
	}
	return nil
}

// cut shortens a schema quoted in an error.
func cut(b []byte) string {
	const max = 300
	if len(b) <= max {
		return string(b)
	}
	return string(b[:max]) + "..."
}
