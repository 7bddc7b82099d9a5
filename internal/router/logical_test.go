package router

import (
	"strings"
	"testing"
)

func TestMessagePlanRoutesJSONContent(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AdditionalPlacement = "type:header:eventType,seq:header"
	r, err := New(cfg, DefaultConverters())
	if err != nil {
		t.Fatal(err)
	}
	mp, err := r.BindMessage("outbox")
	if err != nil {
		t.Fatal(err)
	}
	if got := mp.Table(); got != "message:outbox" {
		t.Errorf("Table() = %q, want message:outbox", got)
	}
	type want struct {
		topic, key, value string
		nullKey           bool
		tombstone         bool
		headers           string // id=…;eventType=…;seq=…, <nil> for a null value
	}
	for _, tc := range []struct {
		name    string
		content string
		want    want
	}{
		{"object payload as written", `{"id":"e1","aggregatetype":"order","aggregateid":"A-1","type":"Created","payload":{"a":1}}`,
			want{topic: "outbox.event.order", key: "A-1", value: `{"a":1}`, headers: "id=e1;eventType=Created;seq=<nil>"}},
		{"string payload keeps its quotes", `{"id":"e2","aggregatetype":"order","aggregateid":"A-1","payload":"x"}`,
			want{topic: "outbox.event.order", key: "A-1", value: `"x"`, headers: "id=e2;eventType=<nil>;seq=<nil>"}},
		{"numbers and booleans are their JSON text", ` { "id" : 7 , "aggregatetype":"order", "aggregateid": 12.50, "payload":[1, 2], "seq": true } `,
			want{topic: "outbox.event.order", key: "12.50", value: `[1, 2]`, headers: "id=7;eventType=<nil>;seq=true"}},
		{"escaped strings are unescaped", `{"id":"e\u0033","aggregatetype":"or\u0064er","aggregateid":"A\\\"1","payload":{"s":"}\"{"}}`,
			want{topic: "outbox.event.order", key: `A\"1`, value: `{"s":"}\"{"}`, headers: "id=e3;eventType=<nil>;seq=<nil>"}},
		{"null and absent keys are NULL, unknown keys ignored", `{"id":"e4","aggregatetype":"order","aggregateid":null,"payload":null,"other":{"x":[1]}}`,
			want{topic: "outbox.event.order", nullKey: true, tombstone: true, headers: "id=e4;eventType=<nil>;seq=<nil>"}},
		{"escaped key", `{"\u0069d":"e5","aggregatetype":"order","aggregateid":"A","payload":{}}`,
			want{topic: "outbox.event.order", key: "A", value: `{}`, headers: "id=e5;eventType=<nil>;seq=<nil>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cols, err := mp.Columns([]byte(tc.content))
			if err != nil {
				t.Fatal(err)
			}
			msg, err := mp.Route(cols, commitTime)
			if err != nil {
				t.Fatal(err)
			}
			var hs []string
			for _, h := range msg.Headers {
				v := string(h.Value)
				if h.Value == nil {
					v = "<nil>"
				}
				hs = append(hs, h.Key+"="+v)
			}
			got := want{topic: msg.Topic, key: string(msg.Key), value: string(msg.Value), nullKey: msg.Key == nil,
				tombstone: msg.Value == nil, headers: strings.Join(hs, ";")}
			if got != tc.want {
				t.Errorf("routed\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestMessagePlanRejectsBadContent(t *testing.T) {
	r, err := New(DefaultConfig(), DefaultConverters())
	if err != nil {
		t.Fatal(err)
	}
	mp, err := r.BindMessage("outbox")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, content, want string }{
		{"not JSON", `{"id":`, "not valid JSON"},
		{"not UTF-8", "{\"id\":\"\xff\"}", "not valid UTF-8"},
		{"an array", `[{"id":"x"}]`, "a JSON array, not an object"},
		{"a string", `"x"`, "a JSON string, not an object"},
		{"no id", `{"aggregatetype":"order","payload":{}}`, `has no "id"`},
		{"null id", `{"id":null,"aggregatetype":"order"}`, `has no "id"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mp.Columns([]byte(tc.content))
			class, ok := ClassOf(err)
			if !ok || class != ClassPayloadInvalid || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Columns(%q) = %v (class %v), want payload_invalid containing %q", tc.content, err, class, tc.want)
			}
		})
	}
}

func TestMessagePlanSchemaEnvelopeBinds(t *testing.T) {
	conv := DefaultConverters()
	conv.Value = "org.apache.kafka.connect.json.JsonConverter"
	r, err := New(DefaultConfig(), conv)
	if err != nil {
		t.Fatal(err)
	}
	mp, err := r.BindMessage("outbox")
	if err != nil {
		t.Fatal(err)
	}
	cols, err := mp.Columns([]byte(`{"id":"e1","aggregatetype":"order","aggregateid":"A","payload":{"a":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := mp.Route(cols, commitTime)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"schema":{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1},"payload":"{\"a\":1}"}`
	if string(msg.Value) != want {
		t.Errorf("value = %s\nwant %s", msg.Value, want)
	}
}
