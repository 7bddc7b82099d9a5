package avro

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/connect"
)

// The subjects of schema-serializer's TopicNameStrategy, RecordNameStrategy
// and TopicRecordNameStrategy (io/confluent/kafka/serializers/subject/),
// and RecordNameStrategy.getRecordName's refusal of a schema that is not a
// record.
func TestSubjectStrategies(t *testing.T) {
	envelope, err := FromConnectSchema(&connect.Schema{Type: connect.TypeStruct, Name: "srv.public.outbox.order.Value",
		Fields: []connect.Field{{Name: "payload", Schema: &connect.Schema{Type: connect.TypeString}}}}, Options{ConnectMetaData: true})
	if err != nil {
		t.Fatal(err)
	}
	payload, err := FromConnectSchema(&connect.Schema{Type: connect.TypeString, Optional: true}, Options{ConnectMetaData: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		strategy SubjectStrategy
		isKey    bool
		schema   *Schema
		want     string // "" when an error is wanted
	}{
		{TopicNameStrategy, false, envelope, "outbox.event.order-value"},
		{TopicNameStrategy, true, payload, "outbox.event.order-key"},
		{TopicNameStrategy, false, payload, "outbox.event.order-value"},
		{RecordNameStrategy, false, envelope, "srv.public.outbox.order.Value"},
		{TopicRecordNameStrategy, false, envelope, "outbox.event.order-srv.public.outbox.order.Value"},
		{RecordNameStrategy, false, payload, ""},
		{TopicRecordNameStrategy, true, payload, ""},
	} {
		got, err := tc.strategy.Subject("outbox.event.order", tc.isKey, tc.schema)
		switch {
		case tc.want == "" && (err == nil || !strings.Contains(err.Error(), "not a record")):
			t.Errorf("%s key=%t on %s = %q, %v; want an error saying it is not a record", tc.strategy, tc.isKey, tc.schema, got, err)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("%s key=%t = %q, %v; want %q", tc.strategy, tc.isKey, got, err, tc.want)
		}
	}
	for name, want := range map[string]SubjectStrategy{
		"": TopicNameStrategy, "TopicNameStrategy": TopicNameStrategy,
		"io.confluent.kafka.serializers.subject.RecordNameStrategy": RecordNameStrategy,
		" TopicRecordNameStrategy ":                                 TopicRecordNameStrategy,
	} {
		if got, err := ParseSubjectStrategy(name); err != nil || got != want {
			t.Errorf("ParseSubjectStrategy(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	for _, bad := range []string{"AssociatedNameStrategy", "io.confluent.kafka.serializers.subject.Nope", "topicnamestrategy"} {
		if _, err := ParseSubjectStrategy(bad); err == nil {
			t.Errorf("ParseSubjectStrategy(%q) succeeded", bad)
		}
	}
}
