package verify

import (
	"strings"
	"testing"
)

// rec is a record of the ledger event id: its value's digest is the
// event's (see TestCheck's ledger).
func rec(id, key string, p int32, off int64) Record {
	return Record{ID: id, Key: key, Digest: "d-" + id, Topic: "outbox.event.order", Partition: p, Offset: off}
}

func digested(r Record, digest string) Record {
	r.Digest = digest
	return r
}

func TestCheck(t *testing.T) {
	ledger := []Event{
		{ID: "a1", Key: "a", Version: 1, Digest: "d-a1"},
		{ID: "a2", Key: "a", Version: 2, Digest: "d-a2"},
		{ID: "a3", Key: "a", Version: 3, Digest: "d-a3"},
		{ID: "b1", Key: "b", Version: 1, Digest: "d-b1"},
		{ID: "p1", Key: "poison", Version: 0, Digest: "d-p1"},
	}
	dlq := Record{ID: "p1", Topic: "walrelay.deadletter", DeadLetter: true}
	for _, tc := range []struct {
		name       string
		rolledBack []string
		records    []Record
		want       Report
		wantErr    string // substring; "" means Err() == nil
	}{
		{
			name:    "all delivered once in order",
			records: []Record{rec("a1", "a", 0, 0), rec("b1", "b", 1, 0), rec("a2", "a", 0, 1), rec("a3", "a", 0, 2), dlq},
			want:    Report{Committed: 5, Delivered: 5, DeadLettered: 1},
		},
		{
			name:    "input order does not matter, offsets do",
			records: []Record{rec("a3", "a", 0, 2), dlq, rec("a2", "a", 0, 1), rec("b1", "b", 1, 0), rec("a1", "a", 0, 0)},
			want:    Report{Committed: 5, Delivered: 5, DeadLettered: 1},
		},
		{
			name: "re-sent after a restart: duplicates, first occurrences in order",
			records: []Record{rec("a1", "a", 0, 0), rec("a2", "a", 0, 1), rec("a1", "a", 0, 2), rec("a2", "a", 0, 3),
				rec("a3", "a", 0, 4), rec("b1", "b", 1, 0), rec("b1", "b", 1, 1), dlq, dlq},
			want: Report{Committed: 5, Delivered: 5, DeadLettered: 1, Duplicates: 4},
		},
		{
			name:    "lost",
			records: []Record{rec("a1", "a", 0, 0), rec("a3", "a", 0, 1), rec("b1", "b", 1, 0)},
			want:    Report{Committed: 5, Delivered: 3, Lost: 2, LostIDs: []string{"a2", "p1"}},
			wantErr: "2 lost",
		},
		{
			name:       "rolled back and unknown ids are invented",
			rolledBack: []string{"r1"},
			records:    []Record{rec("a1", "a", 0, 0), rec("a2", "a", 0, 1), rec("a3", "a", 0, 2), rec("b1", "b", 1, 0), dlq, rec("r1", "a", 0, 3), rec("zz", "b", 1, 1)},
			want:       Report{Committed: 5, Delivered: 5, DeadLettered: 1, Invented: 2, RolledBack: 1},
			wantErr:    "2 invented (1 rolled back)",
		},
		{
			name:    "first occurrences out of order",
			records: []Record{rec("a2", "a", 0, 0), rec("a1", "a", 0, 1), rec("a3", "a", 0, 2), rec("b1", "b", 1, 0), dlq},
			want:    Report{Committed: 5, Delivered: 5, DeadLettered: 1, OrderViolations: 1},
			wantErr: "version 1",
		},
		{
			name:    "a later version first seen before an earlier one",
			records: []Record{rec("a1", "a", 0, 0), rec("a1", "a", 0, 1), rec("a3", "a", 0, 2), rec("a2", "a", 0, 3), rec("b1", "b", 1, 0), dlq},
			want:    Report{Committed: 5, Delivered: 5, DeadLettered: 1, Duplicates: 1, OrderViolations: 1},
			wantErr: "1 order violations",
		},
		{
			name:    "key on two partitions",
			records: []Record{rec("a1", "a", 0, 0), rec("a2", "a", 2, 0), rec("a3", "a", 0, 1), rec("b1", "b", 1, 0), dlq},
			want:    Report{Committed: 5, Delivered: 5, DeadLettered: 1, OrderViolations: 1},
			wantErr: "on outbox.event.order[0] and outbox.event.order[2]",
		},
		{
			name:    "wrong key",
			records: []Record{rec("a1", "a", 0, 0), rec("a2", "a", 0, 1), rec("a3", "a", 0, 2), rec("b1", "x", 1, 0), dlq},
			want:    Report{Committed: 5, Delivered: 5, DeadLettered: 1, Misrouted: 1},
			wantErr: "1 misrouted",
		},
		{
			name:    "poison row on its topic and the dead-letter topic is not only dead-lettered",
			records: []Record{rec("a1", "a", 0, 0), rec("a2", "a", 0, 1), rec("a3", "a", 0, 2), rec("b1", "b", 1, 0), rec("p1", "poison", 3, 0), dlq},
			want:    Report{Committed: 5, Delivered: 5, Duplicates: 1},
		},
		{
			name: "a value that is not the event's payload, in a first delivery and in a duplicate",
			records: []Record{rec("a1", "a", 0, 0), digested(rec("a2", "a", 0, 1), "bad"), rec("a3", "a", 0, 2),
				rec("b1", "b", 1, 0), digested(rec("b1", "b", 1, 1), "bad"), dlq},
			want:    Report{Committed: 5, Delivered: 5, DeadLettered: 1, Duplicates: 1, Corrupted: 2},
			wantErr: "2 corrupted",
		},
		{
			name:    "nothing read",
			want:    Report{Committed: 5, Lost: 5, LostIDs: []string{"a1", "a2", "a3", "b1", "p1"}},
			wantErr: "5 lost",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(ledger, tc.rolledBack, tc.records)
			if got.Committed != tc.want.Committed || got.Delivered != tc.want.Delivered || got.DeadLettered != tc.want.DeadLettered ||
				got.Lost != tc.want.Lost || got.Duplicates != tc.want.Duplicates || got.Invented != tc.want.Invented ||
				got.RolledBack != tc.want.RolledBack || got.Misrouted != tc.want.Misrouted || got.Corrupted != tc.want.Corrupted ||
				got.OrderViolations != tc.want.OrderViolations {
				t.Errorf("Check:\n got %s rolledback=%d\nwant %s rolledback=%d", got, got.RolledBack, tc.want, tc.want.RolledBack)
			}
			if tc.want.LostIDs != nil && strings.Join(got.LostIDs, ",") != strings.Join(tc.want.LostIDs, ",") {
				t.Errorf("LostIDs = %v, want %v", got.LostIDs, tc.want.LostIDs)
			}
			err := got.Err()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Err() = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Err() = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestCheckDuplicateLedgerID(t *testing.T) {
	got := Check([]Event{{ID: "x", Key: "k", Version: 1}, {ID: "x", Key: "k", Version: 2}}, nil, []Record{rec("x", "k", 0, 0)})
	if err := got.Err(); err == nil || !strings.Contains(err.Error(), "ledger lists event x twice") {
		t.Errorf("Err() = %v", err)
	}
}

func TestCheckSamplesAreBounded(t *testing.T) {
	var ledger []Event
	for i := range 100 {
		ledger = append(ledger, Event{ID: string(rune('A' + i)), Key: "k", Version: i + 1})
	}
	got := Check(ledger, nil, nil)
	if got.Lost != 100 || len(got.LostIDs) != maxSamples {
		t.Errorf("Lost = %d with %d samples, want 100 with %d", got.Lost, len(got.LostIDs), maxSamples)
	}
}

func TestProducerInterleavings(t *testing.T) {
	pr := func(p int32, off, producer int64) Record {
		return Record{Topic: "t", Partition: p, Offset: off, ProducerID: producer}
	}
	// epoch is a record of producer id 7 (one transactional id) at an
	// epoch: each walrelay process with exactly-once delivery.
	epoch := func(p int32, off int64, e int16) Record {
		return Record{Topic: "t", Partition: p, Offset: off, ProducerID: 7, ProducerEpoch: e}
	}
	for _, tc := range []struct {
		name    string
		records []Record
		want    int
		blocks  string
	}{
		{name: "one producer", records: []Record{pr(0, 0, 1), pr(0, 1, 1)}, want: 0},
		{name: "takeover", records: []Record{pr(0, 0, 1), pr(0, 1, 1), pr(0, 2, 2), pr(1, 0, 1), pr(1, 1, 2), pr(1, 2, 3)}, want: 0},
		{name: "sorted by offset first", records: []Record{pr(0, 2, 2), pr(0, 0, 1), pr(0, 1, 1)}, want: 0},
		{name: "interleaved", records: []Record{pr(0, 0, 1), pr(0, 1, 2), pr(0, 2, 1)}, want: 1},
		{name: "interleaved on one partition only", records: []Record{pr(0, 0, 1), pr(0, 1, 2), pr(1, 0, 1), pr(1, 1, 2), pr(1, 2, 1), pr(1, 3, 2)}, want: 2},
		{name: "same producer on separate partitions", records: []Record{pr(0, 0, 2), pr(1, 0, 1), pr(1, 1, 2)}, want: 0},
		{name: "epochs of one producer id take over", records: []Record{epoch(0, 0, 0), epoch(0, 1, 0), epoch(0, 2, 1), epoch(0, 3, 2)}, want: 0},
		{name: "a fenced epoch writes again", records: []Record{epoch(0, 0, 0), epoch(0, 1, 1), epoch(0, 2, 0)}, want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ProducerInterleavings(tc.records); len(got) != tc.want {
				t.Errorf("ProducerInterleavings = %q, want %d findings", got, tc.want)
			}
		})
	}
	blocks := ProducerBlocks([]Record{pr(0, 0, 1), pr(0, 1, 1), pr(0, 2, 2), pr(1, 0, 3), epoch(2, 0, 0), epoch(2, 1, 1)})
	if got := blocks["t[0]"]; len(got) != 2 || got[0] != (Producer{ID: 1}) || got[1] != (Producer{ID: 2}) {
		t.Errorf("ProducerBlocks t[0] = %v, want [1/0 2/0]", got)
	}
	if got := blocks["t[2]"]; len(got) != 2 || got[0] != (Producer{ID: 7}) || got[1] != (Producer{ID: 7, Epoch: 1}) {
		t.Errorf("ProducerBlocks t[2] = %v, want [7/0 7/1]", got)
	}
}

func TestErrExactlyOnce(t *testing.T) {
	ledger := []Event{{ID: "a1", Key: "a", Version: 1}, {ID: "a2", Key: "a", Version: 2}}
	once := Check(ledger, nil, []Record{rec("a1", "a", 0, 0), rec("a2", "a", 0, 1)})
	if err := once.ErrExactlyOnce(); err != nil {
		t.Errorf("every event once: ErrExactlyOnce() = %v", err)
	}
	twice := Check(ledger, nil, []Record{rec("a1", "a", 0, 0), rec("a2", "a", 0, 1), rec("a1", "a", 0, 2)})
	if err := twice.Err(); err != nil {
		t.Errorf("a duplicate: Err() = %v, want nil (at least once)", err)
	}
	if err := twice.ErrExactlyOnce(); err == nil || !strings.Contains(err.Error(), "1 duplicates under exactly-once delivery, e.g. a1 (outbox.event.order[0]@2)") {
		t.Errorf("a duplicate: ErrExactlyOnce() = %v", err)
	}
	lostAndTwice := Check(ledger, nil, []Record{rec("a1", "a", 0, 0), rec("a1", "a", 0, 1)})
	if err := lostAndTwice.ErrExactlyOnce(); err == nil || !strings.Contains(err.Error(), "1 lost") || !strings.Contains(err.Error(), "1 duplicates") {
		t.Errorf("lost and a duplicate: ErrExactlyOnce() = %v", err)
	}
}
