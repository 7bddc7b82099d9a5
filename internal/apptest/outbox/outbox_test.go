package outbox_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/testenv"
	"github.com/walrelay/walrelay/outbox"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  outbox.Config
		want string // in the error
	}{
		{"three_part_table", outbox.Config{Table: "db.public.outbox"}, `Table "db.public.outbox": want "schema.table"`},
		{"empty_schema", outbox.Config{Table: ".outbox"}, `Table ".outbox": empty name`},
		{"long_table", outbox.Config{Table: strings.Repeat("t", 64)}, "longer than Postgres's 63 bytes"},
		{"prefix_for_rows", outbox.Config{Prefix: "outbox"}, `Prefix "outbox" is set for StyleRow`},
		{"message_without_prefix", outbox.Config{Style: outbox.StyleMessage}, "Prefix is empty for StyleMessage"},
		{"message_with_table", outbox.Config{Style: outbox.StyleMessage, Prefix: "outbox", Table: "public.outbox"}, `Table "public.outbox" is set for StyleMessage`},
		{"prefix_not_utf8", outbox.Config{Style: outbox.StyleMessage, Prefix: "\xff"}, "not UTF-8"},
		{"unknown_style", outbox.Config{Style: 7}, "Style 7"},
		{"same_column_twice", outbox.Config{Columns: outbox.Columns{AggregateID: "id"}}, `Columns.ID and Columns.AggregateID are both "id"`},
		{"column_nul", outbox.Config{Columns: outbox.Columns{Payload: "pay\x00load"}}, `Columns.Payload "pay\x00load": not UTF-8 text without NUL`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := outbox.New(tc.cfg)
			if !errors.Is(err, outbox.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New(%+v) = %v, want ErrInvalidConfig containing %q", tc.cfg, err, tc.want)
			}
		})
	}
	for _, cfg := range []outbox.Config{{}, {Table: "outbox"}, {Table: "Events.Outbox"}, {Style: outbox.StyleMessage, Prefix: "outbox"}} {
		if _, err := outbox.New(cfg); err != nil {
			t.Errorf("New(%+v) = %v, want a Writer", cfg, err)
		}
	}
}

// validEvent is an event both styles accept.
func validEvent() outbox.Event {
	return outbox.Event{AggregateType: "order", AggregateID: "o-1", Type: "OrderCreated", Payload: []byte(`{"a":1}`)}
}

// TestEmitRefuses checks that events walrelay could not route are refused
// before anything reaches Postgres: the nil transaction would panic if
// Emit got that far.
func TestEmitRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		style  outbox.Style
		mutate func(*outbox.Event)
		want   string
	}{
		{"no_aggregate_type", outbox.StyleRow, func(e *outbox.Event) { e.AggregateType = "" }, "AggregateType is empty: walrelay routes on it"},
		{"blank_aggregate_id", outbox.StyleRow, func(e *outbox.Event) { e.AggregateID = " " }, "AggregateID is empty"},
		{"no_type", outbox.StyleMessage, func(e *outbox.Event) { e.Type = "" }, "Type is empty"},
		{"payload_not_json", outbox.StyleRow, func(e *outbox.Event) { e.Payload = []byte(`{"a":`) }, "Payload is not valid JSON"},
		{"payload_not_json_message", outbox.StyleMessage, func(e *outbox.Event) { e.Payload = []byte(`nope`) }, "Payload is not valid JSON"},
		{"key_not_utf8", outbox.StyleMessage, func(e *outbox.Event) { e.AggregateID = "o-\xff" }, "AggregateID \"o-\\xff\" is not UTF-8"},
		{"field_is_a_column", outbox.StyleRow, func(e *outbox.Event) { e.Fields = map[string]any{"payload": "x"} }, `Fields["payload"] is the Payload column`},
		{"field_object_in_message", outbox.StyleMessage, func(e *outbox.Event) { e.Fields = map[string]any{"meta": map[string]int{"a": 1}} }, `Fields["meta"]: a map[string]int`},
		{"field_nan_in_message", outbox.StyleMessage, func(e *outbox.Event) { e.Fields = map[string]any{"score": json.Number("x")} }, `json.Number "x" is not a number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := outbox.Config{Style: tc.style}
			if tc.style == outbox.StyleMessage {
				cfg.Prefix = "outbox"
			}
			w, err := outbox.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ev := validEvent()
			tc.mutate(&ev)
			id, err := w.Emit(t.Context(), nil, ev)
			if !errors.Is(err, outbox.ErrInvalidEvent) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Emit = %q, %v; want ErrInvalidEvent containing %q", id, err, tc.want)
			}
			if _, err := w.EmitSQL(t.Context(), nil, ev); !errors.Is(err, outbox.ErrInvalidEvent) {
				t.Fatalf("EmitSQL = %v, want ErrInvalidEvent", err)
			}
		})
	}
}
