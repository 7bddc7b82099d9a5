package conformance

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Setting is a converter setting a case is compared in.
type Setting string

// The settings: walrelay's default raw format, and the Kafka Connect
// converters Debezium users run, with SimpleHeaderConverter (Connect's
// default header converter) for headers. The avro settings run
// Confluent's AvroConverter for keys and values against a schema registry
// of their own (testenv.Registry).
const (
	SettingRaw           Setting = "raw"            // converter key/value/header raw
	SettingString        Setting = "string"         // StringConverter, SimpleHeaderConverter
	SettingJSON          Setting = "json"           // JsonConverter schemas.enable=true, SimpleHeaderConverter
	SettingJSONNoSchemas Setting = "json-noschemas" // JsonConverter schemas.enable=false, SimpleHeaderConverter
	SettingAvro          Setting = "avro"           // AvroConverter (connect.meta.data=true, its default), SimpleHeaderConverter
	SettingAvroNoMeta    Setting = "avro-nometa"    // AvroConverter connect.meta.data=false, SimpleHeaderConverter
)

var allSettings = []Setting{SettingRaw, SettingString, SettingJSON, SettingJSONNoSchemas, SettingAvro, SettingAvroNoMeta}

// Outcome is what a case expects of the relay.
type Outcome int

const (
	// NotRun: the case is a documented difference as a whole.
	NotRun Outcome = iota
	// Records: the relay publishes exactly the case's records.
	Records
	// Stops: the relay stops with an error (at startup or on a row); what
	// landed, if anything, is among the case's records.
	Stops
	// Rejected: the configuration is refused before anything runs.
	Rejected
)

// Column is one column of a case's outbox table.
type Column struct {
	Name string
	// DDL is the column's type and constraints, e.g. "varchar(255) NOT
	// NULL": chosen so that Debezium's Postgres connector gives the column
	// the Connect schema in Schema.
	DDL    string
	Schema *Schema
}

// Omitted is a row value left out of the INSERT, so the column's DEFAULT
// applies; V is the value that DEFAULT gives.
type Omitted struct{ V any }

// TS is a timestamp column value: its SQL and its epoch milliseconds.
type TS struct {
	SQL    string
	Millis int64
}

// Row is an INSERT: column → Connect value (string, int32, bool, []byte,
// nil, TS, Omitted).
type Row map[string]any

// Step is one transaction of a case: an INSERT of Row, or SQL (an UPDATE
// or DELETE; {table} names the case's table).
type Step struct {
	Insert Row
	SQL    string
}

// Header is an expected header in Connect terms.
type Header struct {
	Name   string
	Schema *Schema
	Value  any
}

// Record is an expected record in Connect terms: what Debezium's router
// returns for one step.
type Record struct {
	Step      int // index of the step (its transaction) that produces it
	Topic     string
	KeySchema *Schema
	Key       any
	// ValueSchema and Value both nil: a Kafka tombstone.
	ValueSchema *Schema
	Value       any
	Headers     []Header
	// Partition is set when the router places the record (partition
	// placement); otherwise murmur2 over the key bytes decides.
	Partition *int32
	// TSMillis is the record timestamp from a column; 0 means the
	// transaction's commit time (walrelay's rule; see record-timestamp).
	TSMillis int64
	// RawValue, when set, is the raw setting's value where it cannot be
	// derived from the Connect value (table.expand.json.payload changes
	// only what Connect's converters write).
	RawValue *string
}

// Case is one Debezium test method translated into Postgres terms.
type Case struct {
	Java string // Class.method
	// Opts are the router options, by Debezium's names, as the Java test
	// puts them in its config map.
	Opts    map[string]string
	Columns []Column
	Steps   []Step
	Want    []Record
	Outcome Outcome
	// Difference is the anchor in docs/debezium-conformance.md explaining
	// why the case is not run (Outcome NotRun), or, for a run case, what
	// part of Debezium's behaviour the comparison leaves out.
	Difference []string
	// SettingDiff names settings not compared, with the anchor saying why.
	SettingDiff map[Setting]string
	// Topics are topics created before the relay starts, with their
	// partition counts (others are created by the relay with 6).
	Topics map[string]int32
	// Note explains the translation (column types, rows).
	Note string

	tag string // set by the catalog: unique, for tables and topics
}

// Table is the case's table name.
func (c *Case) Table() string { return "t_" + c.tag }

// Name is the subtest name: the Java method.
func (c *Case) Name() string { return c.Java }

// resolve replaces the placeholders {tag} (the case's tag and a dot, put
// before routing values so that cases sharing a relay land on their own
// topics) and {table} in every string of the case.
func (c *Case) resolve() {
	r := strings.NewReplacer("{tag}", c.tag+".", "{table}", c.Table())
	for i := range c.Steps {
		c.Steps[i].SQL = r.Replace(c.Steps[i].SQL)
		for k, v := range c.Steps[i].Insert {
			c.Steps[i].Insert[k] = subst(v, r)
		}
	}
	for k, v := range c.Opts {
		c.Opts[k] = r.Replace(v)
	}
	topics := map[string]int32{}
	for k, v := range c.Topics {
		topics[r.Replace(k)] = v
	}
	c.Topics = topics
	for i := range c.Want {
		w := &c.Want[i]
		w.Topic = r.Replace(w.Topic)
		w.KeySchema, w.ValueSchema = substSchema(w.KeySchema, r), substSchema(w.ValueSchema, r)
		w.Key, w.Value = subst(w.Key, r), subst(w.Value, r)
		for j := range w.Headers {
			w.Headers[j].Value = subst(w.Headers[j].Value, r)
		}
		if w.RawValue != nil {
			s := r.Replace(*w.RawValue)
			w.RawValue = &s
		}
	}
}

func subst(v any, r *strings.Replacer) any {
	switch v := v.(type) {
	case string:
		return r.Replace(v)
	case Omitted:
		return Omitted{subst(v.V, r)}
	case Struct:
		vals := make(map[string]any, len(v.Values))
		for k, x := range v.Values {
			vals[k] = subst(x, r)
		}
		return Struct{Schema: substSchema(v.Schema, r), Values: vals}
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = subst(x, r)
		}
		return out
	}
	return v
}

func substSchema(s *Schema, r *strings.Replacer) *Schema {
	if s == nil {
		return nil
	}
	c := *s
	c.Name = r.Replace(s.Name)
	c.Items = substSchema(s.Items, r)
	c.Fields = make([]Field, len(s.Fields))
	for i, f := range s.Fields {
		c.Fields[i] = Field{Name: f.Name, Schema: substSchema(f.Schema, r)}
	}
	return &c
}

// createSQL is the case's CREATE TABLE. Tables without a primary key get
// REPLICA IDENTITY FULL so their UPDATEs and DELETEs are published.
func (c *Case) createSQL() string {
	var cols []string
	pk := false
	for _, col := range c.Columns {
		cols = append(cols, col.Name+" "+col.DDL)
		pk = pk || strings.Contains(col.DDL, "PRIMARY KEY")
	}
	s := fmt.Sprintf("CREATE TABLE %s (%s);", c.Table(), strings.Join(cols, ", "))
	if !pk {
		s += fmt.Sprintf(" ALTER TABLE %s REPLICA IDENTITY FULL;", c.Table())
	}
	return s
}

// stepSQL is the statement of step i.
func (c *Case) stepSQL(i int) string {
	st := c.Steps[i]
	if st.Insert == nil {
		return st.SQL
	}
	var names, vals []string
	for _, col := range c.Columns {
		v, ok := st.Insert[col.Name]
		if !ok {
			continue // NULL
		}
		if _, omitted := v.(Omitted); omitted {
			continue
		}
		names = append(names, col.Name)
		vals = append(vals, sqlLiteral(v))
	}
	return fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", c.Table(), strings.Join(names, ", "), strings.Join(vals, ", "))
}

func sqlLiteral(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case string:
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	case int32:
		return strconv.Itoa(int(v))
	case bool:
		return strconv.FormatBool(v)
	case []byte:
		return `'\x` + hex.EncodeToString(v) + `'::bytea`
	case TS:
		return v.SQL
	}
	panic(fmt.Sprintf("sqlLiteral: unsupported %T", v))
}

// Expected bytes of a record in a setting.

// keyBytes is the record key as the setting's key converter writes it.
func (w *Record) keyBytes(s Setting) (b []byte, ok bool) {
	switch s {
	case SettingRaw:
		return rawScalar(w.Key), true
	case SettingString:
		return stringConverter(w.Key)
	case SettingJSON, SettingJSONHeaders:
		return jsonConverter(w.KeySchema, w.Key, true), true
	default:
		return jsonConverter(w.KeySchema, w.Key, false), true
	}
}

// valueBytes is the record value as the setting's value converter writes it.
func (w *Record) valueBytes(s Setting) (b []byte, ok bool) {
	switch s {
	case SettingRaw:
		if w.RawValue != nil {
			return []byte(*w.RawValue), true
		}
		if st, isStruct := w.Value.(Struct); isStruct {
			return rawEnvelope(st), true
		}
		return rawScalar(w.Value), true
	case SettingString:
		return stringConverter(w.Value)
	case SettingJSON, SettingJSONHeaders:
		return jsonConverter(w.ValueSchema, w.Value, true), true
	default:
		return jsonConverter(w.ValueSchema, w.Value, false), true
	}
}

// SettingJSONHeaders is JsonConverter for keys, values and headers, each
// with schemas.enable=true (also the header converter's default).
const SettingJSONHeaders Setting = "json-headers"

func init() { allSettings = append(allSettings, SettingJSONHeaders) }

// headerBytes is a header value as the setting's header converter writes it.
func headerBytes(h Header, s Setting) []byte {
	switch s {
	case SettingRaw:
		return rawScalar(h.Value)
	case SettingJSONHeaders:
		// JsonConverter.fromConnectHeader is fromConnectData with the
		// header's schema (apache/kafka JsonConverter.java).
		return jsonConverter(h.Schema, h.Value, true)
	}
	return simpleHeader(h.Value)
}

// rawScalar is walrelay's raw format for a key, a header or a payload
// outside an envelope (internal/router's package doc): the column's Postgres
// text (a boolean is t or f, an integer its digits), bytea as raw bytes,
// jsonb as its JSON text.
func rawScalar(v any) []byte {
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		return []byte(v)
	case []byte:
		return v
	case int32:
		return strconv.AppendInt(nil, int64(v), 10)
	case bool:
		if v {
			return []byte("t")
		}
		return []byte("f")
	}
	panic(fmt.Sprintf("rawScalar: unsupported %T", v))
}

// rawEnvelope is walrelay's raw envelope: a JSON object {"payload": …,
// "<alias>": …} in field order, json/jsonb embedded as JSON, numbers and
// booleans as such, bytea as base64 strings, text as JSON strings (written
// as Jackson does), NULL as null.
func rawEnvelope(st Struct) []byte {
	b := []byte{'{'}
	for i, f := range st.Schema.Fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = jacksonString(b, f.Name)
		b = append(b, ':')
		v := st.Values[f.Name]
		switch v := v.(type) {
		case nil:
			b = append(b, "null"...)
		case string:
			if f.Schema.Name == "io.debezium.data.Json" {
				b = append(b, v...)
			} else {
				b = jacksonString(b, v)
			}
		default:
			b = jsonValue(b, f.Schema, v)
		}
	}
	return append(b, '}')
}
