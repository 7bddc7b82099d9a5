package router

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/connect"
	"github.com/walrelay/walrelay/internal/connect/avro"
)

// This file parses the avro converter's options (Confluent's AvroConverter
// as Kafka Connect configures it: schema-registry
// schema-serializer/src/main/java/io/confluent/kafka/serializers/AbstractKafkaSchemaSerDeConfig.java
// and avro-data/src/main/java/io/confluent/connect/avro/AvroDataConfig.java)
// and gives the relay what it needs to reach the registry.

// Values of the avro converter's options.
const (
	basicAuthURL      = "URL"
	basicAuthUserInfo = "USER_INFO"
	basicAuthSASL     = "SASL_INHERIT"
	bearerStaticToken = "STATIC_TOKEN"
	storeTypePEM      = "PEM"
	avroSchemaConnect = "connect"
	avroSchemaReg     = "registry"
)

// AvroSettings are one side's parsed avro converter options: how the relay
// reaches the schema registry, names subjects and gets ids.
type AvroSettings struct {
	// URLs are the registry's URLs, tried in order, without user info.
	URLs []string
	// BasicAuthUser and BasicAuthPassword are the registry's basic auth
	// credentials (basic.auth.user.info, or the URL's user info with
	// basic.auth.credentials.source URL); empty for none.
	BasicAuthUser, BasicAuthPassword string
	// BearerToken is the static bearer token; empty for none.
	BearerToken string
	// CAFile is a PEM file of CAs that verify the registry (empty: the
	// system's); CertFile a PEM file of the client certificate and its key.
	CAFile, CertFile string
	// Strategy names the subjects.
	Strategy avro.SubjectStrategy
	// AutoRegister, UseLatestVersion, LatestStrict and Normalize are
	// auto.register.schemas, use.latest.version,
	// latest.compatibility.strict and normalize.schemas.
	AutoRegister, UseLatestVersion, LatestStrict, Normalize bool
	// Registry is avro.schema registry: the message's bytes are the
	// payload's JSON text, to encode with the subject's registered schema.
	Registry bool
	// Options are the schema derivation options (connect.meta.data,
	// scrub.invalid.names).
	Options avro.Options
}

// String describes the settings without their secrets (the password and
// the token), so that printing them never leaks one.
func (s AvroSettings) String() string {
	auth := "none"
	switch {
	case s.BasicAuthUser != "":
		auth = "basic user " + strconv.Quote(s.BasicAuthUser)
	case s.BearerToken != "":
		auth = "bearer token"
	}
	return fmt.Sprintf("registry %s, auth %s, CA file %q, cert file %q, %s, auto.register.schemas %v, use.latest.version %v, latest.compatibility.strict %v, normalize.schemas %v, avro.schema registry %v, connect.meta.data %v, scrub.invalid.names %v",
		strings.Join(s.URLs, ","), auth, s.CAFile, s.CertFile, s.Strategy, s.AutoRegister, s.UseLatestVersion, s.LatestStrict,
		s.Normalize, s.Registry, s.Options.ConnectMetaData, s.Options.ScrubInvalidNames)
}

// GoString is String, for %#v.
func (s AvroSettings) GoString() string { return s.String() }

// Avro returns the parsed avro options of the key (isKey) or value
// converter, and false when that converter is not avro.
func (r *Router) Avro(isKey bool) (AvroSettings, bool) {
	spec := r.valueConv
	if isKey {
		spec = r.keyConv
	}
	if spec.avro == nil {
		return AvroSettings{}, false
	}
	return *spec.avro, true
}

// avroOptions are one side's raw avro options, with the names they have
// under converter:.
type avroOptions struct {
	side                                      string
	registryURL, basicSource, userInfo        string
	bearerSource, bearerToken                 string
	caFile, caType, certFile, certType        string
	strategy, avroSchema, versionColumn       string
	autoRegister, useLatest, latestStrict     bool
	normalize, metaData, enhanced, scrubNames bool
}

func (c Converters) avroOptions(isKey bool) avroOptions {
	if isKey {
		return avroOptions{"key", c.KeyRegistryURL, c.KeyBasicAuthSource, c.KeyBasicAuthUserInfo,
			c.KeyBearerAuthSource, c.KeyBearerAuthToken, c.KeyRegistryCAFile, c.KeyRegistryCAType,
			c.KeyRegistryCertFile, c.KeyRegistryCertType, c.KeySubjectStrategy, c.KeyAvroSchema, c.KeyAvroVersionColumn,
			c.KeyAutoRegister, c.KeyUseLatestVersion, c.KeyLatestStrict, c.KeyNormalizeSchemas, c.KeyConnectMetaData,
			c.KeyEnhancedAvro, c.KeyScrubInvalidNames}
	}
	return avroOptions{"value", c.ValueRegistryURL, c.ValueBasicAuthSource, c.ValueBasicAuthUserInfo,
		c.ValueBearerAuthSource, c.ValueBearerAuthToken, c.ValueRegistryCAFile, c.ValueRegistryCAType,
		c.ValueRegistryCertFile, c.ValueRegistryCertType, c.ValueSubjectStrategy, c.ValueAvroSchema, c.ValueAvroVersionColumn,
		c.ValueAutoRegister, c.ValueUseLatestVersion, c.ValueLatestStrict, c.ValueNormalizeSchemas, c.ValueConnectMetaData,
		c.ValueEnhancedAvro, c.ValueScrubInvalidNames}
}

// set returns the first avro option given a value other than its default,
// as "name value", or "".
func (o avroOptions) set() string {
	def := DefaultConverters().avroOptions(o.side == "key")
	for _, s := range [...]struct{ name, v, d string }{
		{"schema.registry.url", o.registryURL, def.registryURL},
		{"basic.auth.credentials.source", o.basicSource, def.basicSource},
		{"basic.auth.user.info", o.userInfo, def.userInfo},
		{"bearer.auth.credentials.source", o.bearerSource, def.bearerSource},
		{"bearer.auth.token", o.bearerToken, def.bearerToken},
		{"schema.registry.ssl.truststore.location", o.caFile, def.caFile},
		{"schema.registry.ssl.truststore.type", o.caType, def.caType},
		{"schema.registry.ssl.keystore.location", o.certFile, def.certFile},
		{"schema.registry.ssl.keystore.type", o.certType, def.certType},
		{"subject.name.strategy", o.strategy, def.strategy},
		{"avro.schema", o.avroSchema, def.avroSchema},
		{"avro.schema.version.column", o.versionColumn, def.versionColumn},
	} {
		if s.v != s.d && !(s.name == "avro.schema" && strings.TrimSpace(s.v) == "") {
			if strings.Contains(s.name, "user.info") || strings.Contains(s.name, "token") {
				return s.name + " (a secret)"
			}
			return fmt.Sprintf("%s %q", s.name, s.v)
		}
	}
	for _, b := range [...]struct {
		name string
		v, d bool
	}{
		{"auto.register.schemas", o.autoRegister, def.autoRegister},
		{"use.latest.version", o.useLatest, def.useLatest},
		{"latest.compatibility.strict", o.latestStrict, def.latestStrict},
		{"normalize.schemas", o.normalize, def.normalize},
		{"connect.meta.data", o.metaData, def.metaData},
		{"enhanced.avro.schema.support", o.enhanced, def.enhanced},
		{"scrub.invalid.names", o.scrubNames, def.scrubNames},
	} {
		if b.v != b.d {
			return fmt.Sprintf("%s %v", b.name, b.v)
		}
	}
	return ""
}

// parseAvro validates one side's avro options. Whether a record strategy
// or avro.schema registry fits the rest of the configuration is checked
// by checkAvro once the placements are known.
func parseAvro(o avroOptions) (*AvroSettings, error) {
	side := "converter " + o.side + "."
	st := &AvroSettings{AutoRegister: o.autoRegister, UseLatestVersion: o.useLatest, LatestStrict: o.latestStrict,
		Normalize: o.normalize, Options: avro.Options{ConnectMetaData: o.metaData, ScrubInvalidNames: o.scrubNames}}
	var urlUser *url.Userinfo
	for _, u := range strings.Split(o.registryURL, ",") {
		u = strings.TrimSpace(u)
		if u == "" {
			continue
		}
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			return nil, fmt.Errorf("%sschema.registry.url %q: want http:// or https:// URLs, comma-separated", side, redactURLs(o.registryURL))
		}
		if pu.User != nil && urlUser == nil {
			urlUser = pu.User
		}
		pu.User = nil
		st.URLs = append(st.URLs, pu.String())
	}
	if len(st.URLs) == 0 {
		return nil, fmt.Errorf("%sschema.registry.url %q: the avro converter needs the schema registry's URL", side, o.registryURL)
	}
	var err error
	if st.Strategy, err = avro.ParseSubjectStrategy(o.strategy); err != nil {
		return nil, fmt.Errorf("%ssubject.name.strategy: %w", side, err)
	}
	switch strings.ToUpper(strings.TrimSpace(o.basicSource)) {
	case "":
		if o.userInfo != "" {
			return nil, fmt.Errorf("%sbasic.auth.user.info is set but %sbasic.auth.credentials.source is not USER_INFO", side, side)
		}
	case basicAuthURL:
		if urlUser == nil {
			return nil, fmt.Errorf("%sbasic.auth.credentials.source URL: no registry URL has user info (https://user:password@host)", side)
		}
		if o.userInfo != "" {
			return nil, fmt.Errorf("%sbasic.auth.user.info is set but %sbasic.auth.credentials.source is URL", side, side)
		}
		st.BasicAuthUser = urlUser.Username()
		st.BasicAuthPassword, _ = urlUser.Password()
	case basicAuthUserInfo:
		user, pass, ok := strings.Cut(o.userInfo, ":")
		if !ok || user == "" {
			return nil, fmt.Errorf("%sbasic.auth.credentials.source USER_INFO: %sbasic.auth.user.info must be user:password", side, side)
		}
		st.BasicAuthUser, st.BasicAuthPassword = user, pass
	case basicAuthSASL:
		return nil, fmt.Errorf("%sbasic.auth.credentials.source %q: walrelay does not take the registry's credentials from Kafka's SASL settings; use USER_INFO with %sbasic.auth.user.info", side, o.basicSource, side)
	default:
		return nil, fmt.Errorf("%sbasic.auth.credentials.source %q: want USER_INFO or URL (or empty for none)", side, o.basicSource)
	}
	switch strings.ToUpper(strings.TrimSpace(o.bearerSource)) {
	case "":
		if o.bearerToken != "" {
			return nil, fmt.Errorf("%sbearer.auth.token is set but %sbearer.auth.credentials.source is not STATIC_TOKEN", side, side)
		}
	case bearerStaticToken:
		if o.bearerToken == "" {
			return nil, fmt.Errorf("%sbearer.auth.credentials.source STATIC_TOKEN: %sbearer.auth.token is empty", side, side)
		}
		if st.BasicAuthUser != "" {
			return nil, fmt.Errorf("%sbearer.auth.credentials.source STATIC_TOKEN: the registry takes basic auth or a bearer token, not both", side)
		}
		st.BearerToken = o.bearerToken
	default:
		return nil, fmt.Errorf("%sbearer.auth.credentials.source %q: walrelay implements STATIC_TOKEN only (or empty for none)", side, o.bearerSource)
	}
	for _, s := range [...]struct{ opt, typ, file string }{
		{"schema.registry.ssl.truststore", o.caType, o.caFile},
		{"schema.registry.ssl.keystore", o.certType, o.certFile},
	} {
		if t := strings.TrimSpace(s.typ); t != "" && !strings.EqualFold(t, storeTypePEM) {
			return nil, fmt.Errorf("%s%s.type %q: walrelay reads PEM files only; convert the store (openssl, keytool -importkeystore) and set PEM", side, s.opt, s.typ)
		}
	}
	st.CAFile, st.CertFile = strings.TrimSpace(o.caFile), strings.TrimSpace(o.certFile)
	switch strings.ToLower(strings.TrimSpace(o.avroSchema)) {
	case avroSchemaConnect, "":
		if o.versionColumn != "" {
			return nil, fmt.Errorf("%savro.schema.version.column %q: only with %savro.schema registry", side, o.versionColumn, side)
		}
	case avroSchemaReg:
		st.Registry = true
	default:
		return nil, fmt.Errorf("%savro.schema %q: want connect or registry", side, o.avroSchema)
	}
	if o.useLatest && o.autoRegister {
		// AbstractKafkaAvroSerializer consults use.latest.version only
		// when auto.register.schemas is false.
		return nil, fmt.Errorf("%suse.latest.version true: only with %sauto.register.schemas false, as Confluent's serializer reads it", side, side)
	}
	return st, nil
}

// redactURLs hides the passwords of comma-separated URLs.
func redactURLs(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		} else if strings.Contains(p, "@") {
			parts[i] = "<redacted>"
		}
	}
	return strings.Join(parts, ",")
}

// checkAvro checks the avro options against the rest of the
// configuration: record subject strategies need a record schema, which
// only an envelope is (a key is a column; docs/design/avro.md 0.5), and
// avro.schema registry encodes a payload's JSON text, so it takes neither
// envelope placements nor table.expand.json.payload.
func (r *Router) checkAvro() error {
	for _, side := range [...]struct {
		name string
		spec convSpec
	}{{"key", r.keyConv}, {"value", r.valueConv}} {
		st := side.spec.avro
		if st == nil {
			continue
		}
		opt := "converter " + side.name + "."
		if st.Strategy != avro.TopicNameStrategy {
			switch {
			case side.name == "key":
				return fmt.Errorf("%ssubject.name.strategy %s: the key's Avro schema is a column's, not a record, so it has no record name (Confluent's serializer fails every record)", opt, st.Strategy)
			case st.Registry:
				return fmt.Errorf("%ssubject.name.strategy %s: with %savro.schema registry the schema comes from the subject, so the subject cannot come from the schema; use TopicNameStrategy", opt, st.Strategy, opt)
			case !r.envelope:
				return fmt.Errorf("%ssubject.name.strategy %s: without envelope placements the value's Avro schema is the payload column's (or an optional record for %s), not a record, so it has no record name; add envelope placements or use TopicNameStrategy", opt, st.Strategy, optExpandJSONPayload)
			}
		}
		if st.Registry {
			if side.name == "value" && r.envelope {
				return fmt.Errorf("%savro.schema registry: the value is the payload's JSON encoded with the registry's schema, which leaves no room for envelope placements (%s)", opt, optAdditionalPlacement)
			}
			if side.name == "value" && r.cfg.ExpandJSONPayload {
				return fmt.Errorf("%savro.schema registry: the registry's schema gives the payload its structure; unset %s", opt, optExpandJSONPayload)
			}
		}
	}
	return nil
}

// avroConverter is the avro converter where the router holds a
// connect.Converter: convert writes Avro itself (avroKey, avroValue),
// into the message's buffer and with the interned schema; this is for
// any other caller.
type avroConverter struct {
	opts     avro.Options
	interner *avro.Interner
}

// FromConnectData returns Confluent's wire format of v (a zero schema id)
// or nil for a null value, as AvroConverter.fromConnectData does.
func (c avroConverter) FromConnectData(s *connect.Schema, v any) ([]byte, error) {
	if v == nil || s == nil {
		return nil, nil
	}
	as, err := c.interner.FromConnectSchema(s, c.opts)
	if err != nil {
		return nil, err
	}
	return avro.AppendMessage(nil, s, as, v)
}

// envAvro is an envelope's Avro schema for one schema version.
type envAvro struct {
	version    int32
	hasVersion bool
	s          *avro.Schema
}

// bindAvro derives the Avro schemas of the plan's fixed Connect schemas
// (the key column's, the payload column's) once, and binds the
// avro.schema.version.column columns.
func (p *Plan) bindAvro(rel Relation, lookup func(opt, col string) (field, error)) error {
	r := p.r
	if ks := r.keyConv.avro; ks != nil && !ks.Registry && p.key.idx >= 0 {
		var err error
		if p.avroKey, err = r.interner.FromConnectSchema(p.key.typed.s, ks.Options); err != nil {
			return fmt.Errorf("%s column %q: avro key schema: %w", optFieldEventKey, p.key.name, err)
		}
	}
	if vs := r.valueConv.avro; vs != nil && !vs.Registry {
		var err error
		if p.avroValue, err = r.interner.FromConnectSchema(p.payload.typed.s, vs.Options); err != nil {
			return fmt.Errorf("%s column %q: avro value schema: %w", optFieldEventPayload, p.payload.name, err)
		}
		if r.envelope {
			p.avroEnv = make(map[string][]envAvro)
		}
	}
	p.avroKeyVersion.idx, p.avroValueVersion.idx = -1, -1
	for _, b := range [...]struct {
		side string
		st   *AvroSettings
		col  string
		dst  *field
	}{
		{"key", r.keyConv.avro, r.conv.KeyAvroVersionColumn, &p.avroKeyVersion},
		{"value", r.valueConv.avro, r.conv.ValueAvroVersionColumn, &p.avroValueVersion},
	} {
		if b.st == nil || !b.st.Registry || b.col == "" {
			continue
		}
		opt := "converter " + b.side + ".avro.schema.version.column"
		f, err := lookup(opt, b.col)
		if err != nil {
			return err
		}
		switch rel.Columns[f.idx].TypeOID {
		case oidInt2, oidInt4, oidInt8:
		default:
			return fmt.Errorf("%s column %q: must be of an integer type (a registry version number)", opt, b.col)
		}
		*b.dst = f
	}
	return nil
}

// avroRegistryVersion reads an avro.schema.version.column: 0 (the latest)
// when unset or NULL.
func avroRegistryVersion(cols []*pglogrepl.TupleDataColumn, f *field) (int32, error) {
	if f.idx < 0 {
		return 0, nil
	}
	d, null, err := columnData(cols, f)
	if err != nil || null {
		return 0, err
	}
	v, err := strconv.ParseInt(string(d), 10, 32)
	if err == nil && v < 1 {
		err = errors.New("a registry version is 1 or more")
	}
	if err != nil {
		return 0, &RowError{Class: ClassPayloadInvalid, Column: f.name, Value: errValue(d), Err: fmt.Errorf("schema registry version: %w", err)}
	}
	return int32(v), nil
}

// avroRegistryRefs marks the key and value of avro.schema registry sides,
// for the relay to encode with the subject's registered schema: the value
// is the payload's text, JSON whatever the column's type (json, jsonb or
// text holding JSON); the key is the key column's value as a JSON value
// (its text for json and jsonb, a number or boolean for those types, a
// JSON string for every other type), since a key column usually holds an
// aggregate id, not JSON, and a key schema of "string" or "long" takes it.
func (p *Plan) avroRegistryRefs(msg *Message, cols []*pglogrepl.TupleDataColumn) error {
	r := p.r
	if ks := r.keyConv.avro; ks != nil && ks.Registry && msg.Key != nil {
		v, err := avroRegistryVersion(cols, &p.avroKeyVersion)
		if err != nil {
			return err
		}
		switch p.key.kind {
		case kindJSON:
		case kindBytea:
			return &RowError{Class: ClassPayloadInvalid, Column: p.key.name,
				Err: errors.New("converter key.avro.schema registry encodes the key as JSON, and a bytea key column holds no JSON")}
		default:
			start := len(msg.Buf)
			if msg.Buf, err = p.appendJSON(msg.Buf, msg.Key, false, p.key.kind); err != nil {
				msg.Buf = msg.Buf[:start]
				return &RowError{Class: ClassPayloadInvalid, Column: p.key.name, Err: fmt.Errorf("the key as JSON: %w", err)}
			}
			msg.Key = msg.Buf[start:len(msg.Buf):len(msg.Buf)]
		}
		msg.KeyAvro = AvroRef{Registry: true, Version: v}
	}
	if vs := r.valueConv.avro; vs != nil && vs.Registry && msg.Value != nil {
		v, err := avroRegistryVersion(cols, &p.avroValueVersion)
		if err != nil {
			return err
		}
		msg.ValueAvro = AvroRef{Registry: true, Version: v}
	}
	return nil
}

// avroKeyTo writes the key as the avro converter does: Confluent's header
// with a zero id, then the Avro body, appended to msg.Buf. A null key is a
// Kafka null.
func (p *Plan) avroKeyTo(msg *Message, ks *connect.Schema, kv any) error {
	if kv == nil || ks == nil {
		msg.Key = nil
		return nil
	}
	start := len(msg.Buf)
	var err error
	if msg.Buf, err = avro.AppendMessage(msg.Buf, ks, p.avroKey, kv); err != nil {
		msg.Buf = msg.Buf[:start]
		return &RowError{Class: ClassPayloadInvalid, Column: p.key.name, Err: fmt.Errorf("key converter avro: %w", err)}
	}
	msg.Key = msg.Buf[start:len(msg.Buf):len(msg.Buf)]
	msg.KeyAvro = AvroRef{Schema: p.avroKey}
	return nil
}

// avroValueTo writes the value as the avro converter does. Without
// envelope placements the schema is the payload column's, derived at Bind
// (or, for an expanded JSON payload, derived and interned per row); with
// them it is the envelope's, derived once per routing value and version
// when the payload is not expanded. The envelope's body is its fields'
// bodies in order, so no Connect struct is built for it.
func (p *Plan) avroValueTo(msg *Message, cols []*pglogrepl.TupleDataColumn, rv []byte) error {
	r := p.r
	opts := r.valueConv.avro.Options
	ps, pv, err := p.connectPayload(cols)
	if err != nil {
		return err
	}
	fail := func(col string, err error) error {
		return &RowError{Class: ClassPayloadInvalid, Column: col, Err: fmt.Errorf("value converter avro: %w", err)}
	}
	start := len(msg.Buf)
	if !r.envelope {
		if pv == nil {
			msg.Value = nil // AvroConverter: a null value is a Kafka null
			return nil
		}
		as := p.avroValue
		if ps != p.payload.typed.s {
			if as, err = r.interner.FromConnectSchema(ps, opts); err != nil {
				return fail(p.payload.name, err)
			}
		}
		if msg.Buf, err = avro.AppendMessage(msg.Buf, ps, as, pv); err != nil {
			msg.Buf = msg.Buf[:start]
			return fail(p.payload.name, err)
		}
		msg.Value = msg.Buf[start:len(msg.Buf):len(msg.Buf)]
		msg.ValueAvro = AvroRef{Schema: as}
		return nil
	}
	var version any
	if p.version.idx >= 0 {
		if version, err = connectValue(cols, &p.version); err != nil {
			return err
		}
	}
	as, err := p.avroEnvelope(rv, version, ps)
	if err != nil {
		return fail(p.payload.name, err)
	}
	msg.Buf = append(msg.Buf, 0, 0, 0, 0, 0)
	if msg.Buf, err = avro.AppendBinary(msg.Buf, ps, nil, pv); err != nil {
		msg.Buf = msg.Buf[:start]
		return fail(p.payload.name, err)
	}
	for i := range p.envFields {
		e := &p.envFields[i]
		v, err := connectValue(cols, &e.field)
		if err == nil {
			msg.Buf, err = avro.AppendBinary(msg.Buf, e.typed.s, nil, v)
		}
		if err != nil {
			msg.Buf = msg.Buf[:start]
			var re *RowError
			if errors.As(err, &re) {
				return err
			}
			return fail(e.name, fmt.Errorf("envelope field %q: %w", e.alias, err))
		}
	}
	msg.Value = msg.Buf[start:len(msg.Buf):len(msg.Buf)]
	msg.ValueAvro = AvroRef{Schema: as}
	return nil
}

// avroEnvelope returns the envelope's Avro schema for routing value rv and
// schema version (nil for none): from the plan's cache when the payload
// schema is the column's, else derived and interned.
func (p *Plan) avroEnvelope(rv []byte, version any, ps *connect.Schema) (*avro.Schema, error) {
	r := p.r
	v, hasVersion := version.(int32)
	fixed := ps == p.payload.typed.s
	if fixed {
		for _, e := range p.avroEnv[string(rv)] {
			if e.version == v && e.hasVersion == hasVersion {
				return e.s, nil
			}
		}
	}
	as, err := r.interner.FromConnectSchema(p.envelopeSchema(rv, version, ps), r.valueConv.avro.Options)
	if err != nil || !fixed {
		return as, err
	}
	if len(p.avroEnv) >= maxCachedTopics {
		clear(p.avroEnv)
	}
	p.avroEnv[string(rv)] = append(p.avroEnv[string(rv)], envAvro{v, hasVersion, as})
	return as, nil
}
