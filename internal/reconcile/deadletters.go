package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/deadletter"
	"github.com/walrelay/walrelay/internal/publisher"
	"github.com/walrelay/walrelay/internal/router"
)

// DeadLettered is a row of the window the relay sent to the dead-letter
// topic instead of its own: its event id and the dead letter's error class
// (walrelay.error.class, docs/deadletter.md).
type DeadLettered struct {
	ID    string `json:"id"`
	Class string `json:"class"`
}

// deadLetters reads relay.dead_letter_topic from the first record at or
// after fromMs to its end and returns the error class of each event id it
// holds (the walrelay.outbox.id header, or "id"). A dead letter of a row is
// produced after the row was committed, so one of a row of the window is
// never before its start. More than max ids is an error: they are held
// besides the passes' records.
func (v *verifier) deadLetters(ctx context.Context, adm *kadm.Client, fromMs int64, max int) (map[string]string, error) {
	topic := v.cfg.Relay.DeadLetterTopic
	out := map[string]string{}
	if topic == "" {
		return out, nil
	}
	spans, err := listRanges(ctx, adm, []string{topic}, fromMs)
	if err != nil {
		return nil, fmt.Errorf("reading the dead-letter topic %q: %w", topic, err)
	}
	var tooMany bool
	err = spans.read(ctx, v.kopts, func(rec *kgo.Record) {
		id, ok := headerOf(rec, deadletter.HeaderOutboxID)
		if !ok || len(id) == 0 {
			if id, ok = headerOf(rec, deadletter.HeaderEventID); !ok || len(id) == 0 {
				return
			}
		}
		class, _ := headerOf(rec, deadletter.HeaderErrorClass)
		if _, held := out[string(id)]; !held && len(out) >= max {
			tooMany = true
			return
		}
		out[string(id)] = string(class)
	})
	if err != nil {
		return nil, fmt.Errorf("reading the dead-letter topic %q: %w", topic, err)
	}
	if tooMany {
		return nil, fmt.Errorf("reading the dead-letter topic %q: more than %d dead letters since %s: verify a shorter window or raise --max-ids", topic, max, v.opts.Since.Add(-v.opts.Margin).UTC().Format("2006-01-02T15:04:05Z"))
	}
	return out, nil
}

// logPolicyClasses are the broker's error classes (those the router cannot
// foresee) whose relay.on_error policy is log: a row the relay skipped
// under them is on no topic and in no dead letter, and verify cannot tell
// it from a missing one. The router's classes are found by routing the row
// (unroutable), whatever their policy.
func logPolicyClasses(p config.ErrorPolicies) []string {
	var out []string
	for _, class := range []router.ErrorClass{router.ClassRecordTooLarge, router.ClassTopicRejected, router.ClassPayloadInvalid} {
		if policy, _ := p.Policy(class); policy == config.PolicyLog {
			out = append(out, class.String())
		}
	}
	return out
}

// skippedTooLarge reports whether the relay skipped msg's row under
// relay.on_error.record_too_large=log before producing it: its record
// alone is over kafka.batch_max_bytes by franz-go's count
// (publisher.AloneSize), the relay's own check. A row over a topic's lower
// max.message.bytes only (the broker's refusal) is not recognized: verify
// does not read topic configurations.
func (v *verifier) skippedTooLarge(msg *router.Message) bool {
	if p, _ := v.cfg.Relay.OnError.Policy(router.ClassRecordTooLarge); p != config.PolicyLog {
		return false
	}
	rec := kgo.Record{Key: msg.Key, Value: msg.Value, Headers: make([]kgo.RecordHeader, 0, len(msg.Headers))}
	for _, h := range msg.Headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return publisher.AloneSize(&rec) > int(v.cfg.Kafka.BatchMaxBytes)
}

// LogPolicyNote is what the report says of missing rows when some error
// classes' policy is log ("" when none is).
func (r *Report) LogPolicyNote() string {
	if len(r.SkippedByLogClasses) == 0 {
		return ""
	}
	var classes []string
	for _, c := range r.SkippedByLogClasses {
		classes = append(classes, "relay.on_error."+c)
	}
	return strings.Join(classes, ", ") + ` = log: a row the relay skipped under it is on no topic and in no dead letter; verify recognizes only a record over kafka.batch_max_bytes (skipped), and cannot tell the others from missing ones; the relay logged each ("kafka refused a record; skipped", with outbox_id) and counted it in walrelay_rows_rejected_total{policy="log"}`
}

// sortDeadLettered sorts the list by id.
func sortDeadLettered(l []DeadLettered) {
	slices.SortFunc(l, func(a, b DeadLettered) int { return strings.Compare(a.ID, b.ID) })
}
