package reconcile_test

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/reconcile"
	"github.com/walrelay/walrelay/internal/testenv"
)

// TestVerifyDeadLetteredUnroutable: a row the router refuses, which the
// relay dead-letters (policy dlq), is dead-lettered with its class, not
// unroutable; with relay.on_error.record_too_large=log the report says
// that such skipped rows cannot be told from missing ones.
func TestVerifyDeadLetteredUnroutable(t *testing.T) {
	f := newFixture(t)
	f.cfg.Relay.OnError.RecordTooLarge = config.PolicyLog
	_, bad := f.deadLetterOne(t, "outbox")

	rep := f.verify(t, false)
	want := []reconcile.DeadLettered{{ID: bad, Class: "routing_value_missing"}}
	if !slices.Equal(rep.DeadLettered, want) || len(rep.Unroutable) != 0 || len(rep.Missing) != 0 {
		t.Errorf("dead_lettered %+v unroutable %v missing %v, want %+v alone", rep.DeadLettered, rep.Unroutable, rep.Missing, want)
	}
	if rep.DeadLetterTopic != f.cfg.Relay.DeadLetterTopic {
		t.Errorf("dead_letter_topic %q, want %q", rep.DeadLetterTopic, f.cfg.Relay.DeadLetterTopic)
	}
	if !slices.Equal(rep.SkippedByLogClasses, []string{"record_too_large"}) || rep.LogPolicyNote() == "" {
		t.Errorf("skipped_by_log_classes %v (note %q), want record_too_large and a note", rep.SkippedByLogClasses, rep.LogPolicyNote())
	}

	// A dead-letter topic verify may not read (no READ ACL): verify
	// still runs, says why, and the row it holds is unroutable again.
	if f.broker.Cluster == nil {
		return
	}
	fault := f.broker.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: f.cfg.Relay.DeadLetterTopic, Err: kerr.TopicAuthorizationFailed, Count: -1})
	defer fault.Remove()
	rep = f.verify(t, false)
	if rep.DeadLettersUnread == "" || len(rep.DeadLettered) != 0 || !slices.Equal(rep.Unroutable, []string{bad}) {
		t.Errorf("with the dead-letter topic unreadable: unread %q dead_lettered %+v unroutable %v, want a reason and %s unroutable", rep.DeadLettersUnread, rep.DeadLettered, rep.Unroutable, bad)
	}
}

// TestVerifySkippedByPolicyLog: with relay.on_error.record_too_large=log,
// a row whose record is over kafka.batch_max_bytes is skipped by the relay
// (logged, counted, on no topic): verify lists it as skipped, not missing.
func TestVerifySkippedByPolicyLog(t *testing.T) {
	f := newFixture(t)
	f.cfg.Relay.OnError.RecordTooLarge = config.PolicyLog
	f.cfg.Kafka.BatchMaxBytes = 16 << 10
	ids := f.insert(t, 4, time.Time{})
	big := testenv.QueryValue[string](t, f.dsn, `INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
		VALUES ('order', 'agg-big', 'Happened', jsonb_build_object('pad', repeat('x', 50000))) RETURNING id::text`)
	f.relayAll(t, len(ids))

	rep := f.verify(t, false)
	want := []reconcile.DeadLettered{{ID: big, Class: "record_too_large"}}
	if !slices.Equal(rep.Skipped, want) || len(rep.Missing) != 0 || len(rep.DeadLettered) != 0 {
		t.Errorf("skipped %+v missing %v dead_lettered %+v, want %+v alone", rep.Skipped, rep.Missing, rep.DeadLettered, want)
	}
}
