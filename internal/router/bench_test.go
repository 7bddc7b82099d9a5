package router

import (
	"strings"
	"testing"
)

// benchPayload is a typical ~300-byte jsonb event.
var benchPayload = `{"orderId": "A-1", "customer": {"id": "C-77", "tier": "gold"}, "lines": [` +
	strings.Repeat(`{"sku": "SKU-123", "qty": 2, "price": 9.99}, `, 4) + `{"sku": "SKU-9", "qty": 1, "price": 1}], "total": 41.95}`

func BenchmarkRoute(b *testing.B) {
	benches := []struct {
		name string
		cfg  func(*Config)
		conv func(*Converters)
		row  []col
	}{
		{name: "defaults", row: with(baseRow(), text("payload", oidJSONB, benchPayload))},
		{name: "headers_timestamp_partition", cfg: func(c *Config) {
			c.FieldEventTimestamp = "created_at"
			c.AdditionalPlacement = "type:header:eventType,tenant:header,shard:partition"
		}, row: with(baseRow(), text("payload", oidJSONB, benchPayload),
			text("created_at", oidTimestamptz, "2026-11-21 10:00:00.123456+00"),
			text("tenant", oidText, "acme"), text("shard", oidInt4, "3"))},
		{name: "envelope", cfg: func(c *Config) { c.AdditionalPlacement = "type:envelope:eventType,tenant:envelope" },
			row: with(baseRow(), text("payload", oidJSONB, benchPayload), text("tenant", oidText, "acme"))},
		// Kafka Connect's default converters: JsonConverter with schemas for
		// key and value, SimpleHeaderConverter.
		{name: "json_converters", conv: func(c *Converters) { c.Key, c.Value, c.Header = "json", "json", "simple" },
			row: with(baseRow(), text("payload", oidJSONB, benchPayload))},
		// Confluent's AvroConverter for key and value (the relay patches
		// the registry's id in later), without and with an envelope.
		{name: "avro_converters", conv: func(c *Converters) { *c = avroConv(true) },
			row: with(baseRow(), text("payload", oidJSONB, benchPayload))},
		{name: "avro_envelope", cfg: func(c *Config) { c.AdditionalPlacement = "type:envelope:eventType,tenant:envelope" },
			conv: func(c *Converters) { *c = avroConv(true) },
			row:  with(baseRow(), text("payload", oidJSONB, benchPayload), text("tenant", oidText, "acme"))},
	}
	for _, bc := range benches {
		b.Run(bc.name, func(b *testing.B) {
			cfg, conv := DefaultConfig(), DefaultConverters()
			if bc.cfg != nil {
				bc.cfg(&cfg)
			}
			if bc.conv != nil {
				bc.conv(&conv)
			}
			p := convPlan(b, cfg, conv, bc.row)
			cols := tuple(bc.row)
			b.ReportAllocs()
			b.SetBytes(int64(len(benchPayload)))
			for b.Loop() {
				if _, err := p.Route(cols, commitTime); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
