package router

// Tests of routing rows to messages: the golden cases, the topic cache, event ids and odd tuples.

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
)

// routeCases are rendered to testdata/router/<name>.golden.
var routeCases = []struct {
	name string
	cfg  func(*Config) // nil keeps DefaultConfig
	row  []col
	// wantJSON asserts the value is valid JSON, on top of the golden file.
	wantJSON bool
}{
	// Defaults and payload types.
	{name: "defaults_jsonb_payload", row: baseRow(), wantJSON: true},
	{name: "jsonb_unicode_nested_byte_identical", wantJSON: true, row: with(baseRow(),
		text("payload", oidJSONB, `{"name": "Zoë ☕ 🚀", "tags": [["a", "b"], [1, [2.50, null]]], "esc": "quote\" tab\t nl\\n", "u": "\u00e9"}`))},
	{name: "json_payload_whitespace_kept", wantJSON: true, row: with(baseRow(),
		text("payload", oidJSON, "{\n  \"b\" : 2,\n  \"a\" : 1 ,\"b\": 3\n}"))},
	{name: "text_payload", row: with(baseRow(), text("payload", oidText, `{"not":"json, just text"} & ünïcode`))},
	{name: "varchar_payload", row: with(baseRow(), text("payload", oidVarchar, "plain string"))},
	{name: "bytea_payload", row: with(baseRow(), text("payload", oidBytea, `\x00ff10416263`))},
	{name: "bytea_payload_bad_hex", row: with(baseRow(), text("payload", oidBytea, `\x0g`))},
	{name: "bytea_payload_odd_hex", row: with(baseRow(), text("payload", oidBytea, `\x012`))},
	{name: "bytea_payload_escape_format", row: with(baseRow(), text("payload", oidBytea, `abc\000`))},

	// Key.
	{name: "key_null", row: with(baseRow(), null("aggregateid", oidVarchar))},
	{name: "key_empty_string", row: with(baseRow(), text("aggregateid", oidVarchar, ""))},
	{name: "key_bytea", row: with(baseRow(), text("aggregateid", oidBytea, `\xdeadbeef`))},
	{name: "key_uuid", row: with(baseRow(), text("aggregateid", oidUUID, "0d9e3b3c-4d2a-4f55-8f0c-1e2d3c4b5a69"))},
	{name: "key_unset", cfg: func(c *Config) { c.FieldEventKey = "" }, row: baseRow()},

	// Custom column names for every table.field option.
	{name: "custom_columns", cfg: func(c *Config) {
		c.FieldEventID = "event_id"
		c.FieldEventKey = "aggregate_id"
		c.FieldEventPayload = "body"
		c.RouteByField = "aggregate_type"
		c.FieldEventTimestamp = "occurred_at"
	}, row: []col{
		text("event_id", oidUUID, "11111111-2222-3333-4444-555555555555"),
		text("aggregate_type", oidText, "customer"),
		text("aggregate_id", oidText, "C-9"),
		text("body", oidJSONB, `{"x": 1}`),
		text("occurred_at", oidTimestamptz, "2026-01-02 03:04:05.678+00"),
	}},

	// tracing.span.context.field (tracing.go): the writer's W3C context is
	// forwarded before "id", as Debezium's ActivateTracingSpan adds it.
	{name: "tracing_context_forwarded", row: with(baseRow(), text("tracingspancontext", oidText,
		"#Sat Nov 21 09:30:00 UTC 2026\ntraceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\ntracestate = congo\\=t61rcWkgMzE\n"))},
	{name: "tracing_context_invalid_ignored", row: with(baseRow(), text("tracingspancontext", oidText, "traceparent=00-xyz-01"))},
	{name: "tracing_context_null", row: with(baseRow(), null("tracingspancontext", oidText))},
	{name: "tracing_custom_column", cfg: func(c *Config) { c.TracingSpanContextField = "trace" }, row: with(baseRow(), text("trace", oidText,
		"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"))},

	// table.field.additional.missing.
	{name: "additional_missing_ignored", cfg: func(c *Config) {
		c.AdditionalPlacement = "type:header:eventType,nosuch:header,nosuch2:envelope"
		c.AdditionalMissing = "IGNORE"
	}, row: baseRow()},

	// Event id.
	{name: "id_null", row: with(baseRow(), null("id", oidUUID))},
	{name: "id_text", row: with(baseRow(), text("id", oidText, "evt-42"))},

	// Timestamp.
	{name: "timestamp_default_commit_time", row: with(baseRow(), text("created_at", oidTimestamptz, "2001-01-01 00:00:00+00"))},
	{name: "timestamp_timestamptz_utc", cfg: tsCol, row: with(baseRow(), text("created_at", oidTimestamptz, "2026-11-21 10:00:00.123456+00"))},
	{name: "timestamp_timestamptz_offset", cfg: tsCol, row: with(baseRow(), text("created_at", oidTimestamptz, "2026-11-21 10:00:00+05:30"))},
	{name: "timestamp_timestamptz_offset_seconds", cfg: tsCol, row: with(baseRow(), text("created_at", oidTimestamptz, "2001-01-01 00:00:00-00:01:15"))},
	{name: "timestamp_without_time_zone", cfg: tsCol, row: with(baseRow(), text("created_at", oidTimestamp, "2026-11-21 10:00:00.5"))},
	{name: "timestamp_date", cfg: tsCol, row: with(baseRow(), text("created_at", oidDate, "2026-11-21"))},
	{name: "timestamp_bc", cfg: tsCol, row: with(baseRow(), text("created_at", oidTimestamptz, "0044-03-15 12:00:00+00 BC"))},
	{name: "timestamp_after_int64_nanoseconds", cfg: tsCol, row: with(baseRow(), text("created_at", oidTimestamptz, "2420-09-07 13:03:45.338+00"))},
	{name: "timestamp_last_int64_millisecond", cfg: tsCol, row: with(baseRow(), text("created_at", oidTimestamptz, "2262-04-11 23:47:16.854+00"))},
	{name: "timestamp_epoch", cfg: tsCol, row: with(baseRow(), text("created_at", oidTimestamptz, "1970-01-01 00:00:00+00"))},
	{name: "timestamp_null_uses_commit_time", cfg: tsCol, row: with(baseRow(), null("created_at", oidTimestamptz))},
	{name: "timestamp_invalid", cfg: tsCol, row: with(baseRow(), text("created_at", oidText, "21/11/2026 10:00"))},
	{name: "timestamp_invalid_date", cfg: tsCol, row: with(baseRow(), text("created_at", oidTimestamp, "2026-02-30 10:00:00"))},
	{name: "timestamp_infinity", cfg: tsCol, row: with(baseRow(), text("created_at", oidTimestamptz, "infinity"))},

	// Routing and topics.
	{name: "route_java_named_group_replacement", cfg: func(c *Config) {
		c.RouteTopicRegex = `(?<domain>[a-z]+)\.(?<entity>[a-z]+)`
		c.RouteTopicReplacement = `${domain}-events.${entity}.v1`
	}, row: with(baseRow(), text("aggregatetype", oidVarchar, "shop.order"))},
	{name: "route_numbered_groups", cfg: func(c *Config) {
		c.RouteTopicRegex = `(.*)_(.*)`
		c.RouteTopicReplacement = `$2.$1`
	}, row: with(baseRow(), text("aggregatetype", oidVarchar, "order_created"))},
	{name: "route_regex_no_match_uses_value", cfg: func(c *Config) {
		c.RouteTopicRegex = `order`
		c.RouteTopicReplacement = `orders-topic`
	}, row: with(baseRow(), text("aggregatetype", oidVarchar, "customer"))},
	{name: "route_regex_partial_no_match", cfg: func(c *Config) {
		c.RouteTopicRegex = `order`
		c.RouteTopicReplacement = `orders-topic`
	}, row: with(baseRow(), text("aggregatetype", oidVarchar, "order2"))},
	// matches() takes "ab" whole, but replaceFirst's find() stops at "a"
	// (leftmost-first alternation), leaving "b" after the replacement.
	{name: "route_replace_first_keeps_tail", cfg: func(c *Config) {
		c.RouteTopicRegex = `a|ab`
		c.RouteTopicReplacement = `topic-`
	}, row: with(baseRow(), text("aggregatetype", oidVarchar, "ab"))},
	{name: "route_by_custom_field_identity", cfg: func(c *Config) {
		c.RouteByField = "type"
		c.RouteTopicReplacement = "${routedByValue}"
	}, row: baseRow()},
	{name: "route_value_null", row: with(baseRow(), null("aggregatetype", oidVarchar))},
	{name: "route_value_empty", row: with(baseRow(), text("aggregatetype", oidVarchar, ""))},
	{name: "topic_invalid_character", row: with(baseRow(), text("aggregatetype", oidVarchar, "order lines"))},
	{name: "topic_invalid_unicode", row: with(baseRow(), text("aggregatetype", oidVarchar, "bestellüng"))},
	{name: "topic_invalid_too_long", row: with(baseRow(), text("aggregatetype", oidVarchar, strings.Repeat("x", 237)))},
	{name: "topic_max_length_ok", row: with(baseRow(), text("aggregatetype", oidVarchar, strings.Repeat("x", 236)))},
	{name: "topic_invalid_dot", cfg: func(c *Config) { c.RouteTopicReplacement = "${routedByValue}" },
		row: with(baseRow(), text("aggregatetype", oidVarchar, "."))},
	{name: "topic_invalid_dotdot", cfg: func(c *Config) { c.RouteTopicReplacement = "${routedByValue}" },
		row: with(baseRow(), text("aggregatetype", oidVarchar, ".."))},

	// Header placements.
	{name: "placement_headers", cfg: func(c *Config) {
		c.AdditionalPlacement = "type:header:eventType, aggregatetype:header,tenant:header"
	}, row: with(baseRow(), text("tenant", oidInt4, "7"))},
	{name: "placement_header_null", cfg: func(c *Config) { c.AdditionalPlacement = "trace:header" },
		row: with(baseRow(), null("trace", oidText))},
	{name: "placement_header_bytea", cfg: func(c *Config) { c.AdditionalPlacement = "sig:header" },
		row: with(baseRow(), text("sig", oidBytea, `\x0102`))},
	{name: "placement_header_id_again", cfg: func(c *Config) { c.AdditionalPlacement = "id:header:ce_id" }, row: baseRow()},

	// Envelope placements.
	{name: "envelope_types", wantJSON: true, cfg: func(c *Config) {
		c.AdditionalPlacement = "type:envelope:eventType,n2:envelope,n4:envelope,n8:envelope,num:envelope,f4:envelope,f8:envelope,ok:envelope,meta:envelope,note:envelope,sig:envelope,gone:envelope,at:envelope"
	}, row: with(baseRow(),
		text("n2", oidInt2, "-3"),
		text("n4", oidInt4, "42"),
		text("n8", oidInt8, "9223372036854775807"),
		text("num", oidNumeric, "12345678901234567890.000100"),
		text("f4", oidFloat4, "1.5e-07"),
		text("f8", oidFloat8, "-1e+300"),
		text("ok", oidBool, "t"),
		text("meta", oidJSONB, `{"k": [1, "two"]}`),
		text("note", oidText, "line1\nline2 \"q\" \\ \x01 é"),
		text("sig", oidBytea, `\x00ff`),
		null("gone", oidText),
		text("at", oidTimestamptz, "2026-11-21 10:00:00+00"))},
	{name: "envelope_number_not_json", wantJSON: true, cfg: func(c *Config) { c.AdditionalPlacement = "a:envelope,b:envelope,c:envelope,d:envelope" },
		row: with(baseRow(), text("a", oidNumeric, "NaN"), text("b", oidFloat8, "Infinity"), text("c", oidFloat4, "-Infinity"), text("d", oidBool, "f"))},
	{name: "envelope_text_payload", wantJSON: true, cfg: func(c *Config) { c.AdditionalPlacement = "type:envelope" },
		row: with(baseRow(), text("payload", oidText, `{"already":"json text"}`))},
	{name: "envelope_bytea_payload", wantJSON: true, cfg: func(c *Config) { c.AdditionalPlacement = "type:envelope" },
		row: with(baseRow(), text("payload", oidBytea, `\x68656c6c6f00`))},
	{name: "envelope_null_payload", wantJSON: true, cfg: func(c *Config) { c.AdditionalPlacement = "type:envelope" },
		row: with(baseRow(), null("payload", oidJSONB))},
	{name: "envelope_null_payload_tombstone", cfg: func(c *Config) {
		c.AdditionalPlacement = "type:envelope"
		c.TombstoneOnEmptyPayload = true
	}, row: with(baseRow(), null("payload", oidJSONB))},
	{name: "envelope_invalid_utf8_text", cfg: func(c *Config) { c.AdditionalPlacement = "note:envelope" },
		row: with(baseRow(), text("note", oidText, "bad \xff byte"))},
	{name: "envelope_invalid_bool", cfg: func(c *Config) { c.AdditionalPlacement = "ok:envelope" },
		row: with(baseRow(), text("ok", oidBool, "yes"))},
	{name: "envelope_bad_bytea", cfg: func(c *Config) { c.AdditionalPlacement = "sig:envelope" },
		row: with(baseRow(), text("sig", oidBytea, `\xzz`))},
	{name: "envelope_and_headers_mixed", wantJSON: true, cfg: func(c *Config) {
		c.AdditionalPlacement = "type:header:eventType,type:envelope:eventType,tenant:partition"
	}, row: with(baseRow(), text("tenant", oidInt4, "2"))},

	// Partition placement.
	{name: "partition_int4", cfg: partCol, row: with(baseRow(), text("shard", oidInt4, "5"))},
	{name: "partition_int8_fits", cfg: partCol, row: with(baseRow(), text("shard", oidInt8, "2147483647"))},
	{name: "partition_null", cfg: partCol, row: with(baseRow(), null("shard", oidInt4))},
	{name: "partition_negative", cfg: partCol, row: with(baseRow(), text("shard", oidInt4, "-1"))},
	{name: "partition_overflow", cfg: partCol, row: with(baseRow(), text("shard", oidInt8, "2147483648"))},
	{name: "partition_not_integer", cfg: partCol, row: with(baseRow(), text("shard", oidNumeric, "1.5"))},

	// Tombstones.
	{name: "tombstone_off_null_payload", row: with(baseRow(), null("payload", oidJSONB))},
	{name: "tombstone_off_empty_payload", row: with(baseRow(), text("payload", oidText, ""))},
	{name: "tombstone_off_blank_payload", row: with(baseRow(), text("payload", oidText, " \t\n"))},
	{name: "tombstone_on_null_payload", cfg: tombstone, row: with(baseRow(), null("payload", oidJSONB))},
	{name: "tombstone_on_empty_payload", cfg: tombstone, row: with(baseRow(), text("payload", oidText, ""))},
	{name: "tombstone_on_blank_payload", cfg: tombstone, row: with(baseRow(), text("payload", oidText, " \t\r\n"))},
	{name: "tombstone_on_nonblank_payload", cfg: tombstone, row: with(baseRow(), text("payload", oidText, " x "))},
	{name: "tombstone_on_empty_bytea", cfg: tombstone, row: with(baseRow(), text("payload", oidBytea, `\x`))},
	{name: "tombstone_on_jsonb_empty_string_is_not_empty", cfg: tombstone, row: with(baseRow(), text("payload", oidJSONB, `""`))},

	// Tuple problems.
	{name: "toast_column", row: with(baseRow(), col{name: "payload", oid: oidJSONB, dt: pglogrepl.TupleDataTypeToast})},
	{name: "binary_column", row: with(baseRow(), col{name: "aggregateid", oid: oidVarchar, dt: pglogrepl.TupleDataTypeBinary, val: "A-1"})},
}

func tsCol(c *Config)     { c.FieldEventTimestamp = "created_at" }
func partCol(c *Config)   { c.AdditionalPlacement = "shard:partition" }
func tombstone(c *Config) { c.TombstoneOnEmptyPayload = true }

func TestRouteGolden(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range routeCases {
		if seen[tc.name] {
			t.Fatalf("duplicate case name %q", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			p := editedPlan(t, tc.cfg, tc.row)
			m, err := p.Route(tuple(tc.row), commitTime)
			if err != nil {
				var re *RowError
				if !errors.As(err, &re) {
					t.Errorf("Route error %T is not a *RowError", err)
				}
			} else {
				if i := idHeader(m.Headers); i < 0 || (i > 0 && m.Headers[0].Key != "traceparent") {
					t.Errorf("\"id\" is not the first header (or the first after the trace headers): %+v", m.Headers)
				}
				if tc.wantJSON && !json.Valid(m.Value) {
					t.Errorf("value is not valid JSON: %q", m.Value)
				}
			}
			checkGolden(t, tc.name, render(m, err))
		})
	}
	if !*update {
		// A golden file without a case is a renamed or deleted case.
		files, err := filepath.Glob(filepath.Join(goldenDir, "*.golden"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if name := strings.TrimSuffix(filepath.Base(f), ".golden"); !seen[name] {
				t.Errorf("stale golden file %s has no case; delete it", f)
			}
		}
	}
}

// TestTopicCache routes values in turn through one Plan, crossing the cache
// bound, and checks every topic.
func TestTopicCache(t *testing.T) {
	row := baseRow()
	p := mustPlan(t, DefaultConfig(), row)
	route := func(v string) (string, error) {
		t.Helper()
		m, err := p.Route(tuple(with(row, text("aggregatetype", oidVarchar, v))), commitTime)
		return m.Topic, err
	}
	for i := 0; i < maxCachedTopics+10; i++ {
		v := "agg" + strconv.Itoa(i)
		got, err := route(v)
		if err != nil || got != "outbox.event."+v {
			t.Fatalf("value %q: topic %q, error %v", v, got, err)
		}
		if len(p.topics) > maxCachedTopics {
			t.Fatalf("cache holds %d topics, bound is %d", len(p.topics), maxCachedTopics)
		}
		// An earlier value still routes to its own topic.
		if got, _ := route("order"); got != "outbox.event.order" {
			t.Fatalf("after %q: order routed to %q", v, got)
		}
	}
	// Invalid topics are reported every time, never cached.
	for range 2 {
		if _, err := route("bad topic"); err == nil {
			t.Fatal("invalid topic accepted")
		}
	}
	if _, ok := p.topics["bad topic"]; ok {
		t.Error("invalid topic was cached")
	}
}

func TestEventID(t *testing.T) {
	tests := []struct {
		name string
		row  []col
		cols func([]*pglogrepl.TupleDataColumn) []*pglogrepl.TupleDataColumn
		want string
	}{
		{name: "uuid", row: baseRow(), want: "5b1c3f0e-8a9d-4e53-9a51-3f8f5a3e2c11"},
		{name: "null", row: with(baseRow(), null("id", oidUUID)), want: ""},
		{name: "toast", row: with(baseRow(), col{name: "id", oid: oidUUID, dt: pglogrepl.TupleDataTypeToast}), want: ""},
		{name: "short tuple", row: baseRow(), cols: func(c []*pglogrepl.TupleDataColumn) []*pglogrepl.TupleDataColumn { return nil }, want: ""},
		{name: "nil column", row: baseRow(), cols: func(c []*pglogrepl.TupleDataColumn) []*pglogrepl.TupleDataColumn {
			c[0] = nil
			return c
		}, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPlan(t, DefaultConfig(), tc.row)
			cols := tuple(tc.row)
			if tc.cols != nil {
				cols = tc.cols(cols)
			}
			if got := p.EventID(cols); got != tc.want {
				t.Errorf("EventID = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRouteShortTuple(t *testing.T) {
	row := with(baseRow(), text("created_at", oidTimestamptz, "2026-11-21 10:00:00+00"))
	cfg := DefaultConfig()
	tsCol(&cfg)
	p := mustPlan(t, cfg, row)
	_, err := p.Route(tuple(row)[:4], commitTime)
	if c, ok := ClassOf(err); !ok || c != ClassColumnMissing {
		t.Fatalf("Route on a short tuple: class %v, error %v; want column_missing", c, err)
	}
}

func TestRouteNilColumnIsNull(t *testing.T) {
	row := baseRow()
	p := mustPlan(t, DefaultConfig(), row)
	cols := tuple(row)
	cols[2] = nil // aggregateid
	m, err := p.Route(cols, commitTime)
	if err != nil || m.Key != nil {
		t.Fatalf("key %q, error %v; want a null key", m.Key, err)
	}
}

// idHeader returns the index of the "id" header, or -1.
func idHeader(hs []Header) int {
	for i, h := range hs {
		if h.Key == "id" {
			return i
		}
	}
	return -1
}

func TestValidTraceparent(t *testing.T) {
	for s, want := range map[string]bool{
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01":     true,
		"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-xyz": true, // a future version may add fields
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-xyz": false,
		"00-00000000000000000000000000000000-b7ad6b7169203331-01":     false,
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01":     false,
		"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01":     false,
		"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01":     false,
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01":      false,
		"": false,
	} {
		if got := validTraceparent(s); got != want {
			t.Errorf("validTraceparent(%q) = %v, want %v", s, got, want)
		}
	}
}
