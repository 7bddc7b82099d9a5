package dbzoffset_test

import (
	"errors"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/walrelay/walrelay/internal/dbzoffset"
	"github.com/walrelay/walrelay/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Values as Connect stores them: PostgresOffsetContext.getOffset() builds
// a java.util.HashMap (ts_usec, txId, lsn, lsn_proc, lsn_commit,
// messageType, lsn_events_processed put in that order) and JsonConverter
// writes its entries in the map's iteration order, which for these keys
// in a 16-bucket table is by bucket (String.hashCode spread by h ^ h>>>16):
// lsn_proc and lsn_events_processed (1), messageType (4), lsn_commit (5),
// lsn (6), txId (9), ts_usec (13); transaction_id (0) comes first when a
// version writes it.
const (
	// After the second INSERT of a transaction, the first at its LSN.
	insertValue = `{"lsn_proc":24023600,"lsn_events_processed":1,"messageType":"INSERT","lsn_commit":24023128,"lsn":24023600,"txId":745,"ts_usec":1761123456789012}`
	// A heartbeat after a COMMIT: the counter was reset, so not written.
	commitValue = `{"lsn_proc":24023900,"messageType":"COMMIT","lsn_commit":24023900,"lsn":24023900,"txId":745,"ts_usec":1761123456789012}`
	// Debezium 1.x-2.x: transaction_id always written, no counter.
	oldValue = `{"transaction_id":null,"lsn_proc":24023600,"messageType":"INSERT","lsn_commit":24023128,"lsn":24023600,"txId":745,"ts_usec":1761123456789012}`
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value string
		want  dbzoffset.Offset
	}{
		{"insert", insertValue, dbzoffset.Offset{LSN: 24023600, LSNProc: 24023600, LSNCommit: 24023128, TxID: 745, HasTxID: true, MessageType: "INSERT", EventsProcessed: 1, TsUsec: 1761123456789012}},
		{"commit", commitValue, dbzoffset.Offset{LSN: 24023900, LSNProc: 24023900, LSNCommit: 24023900, TxID: 745, HasTxID: true, MessageType: "COMMIT", TsUsec: 1761123456789012}},
		{"transaction_id null", oldValue, dbzoffset.Offset{LSN: 24023600, LSNProc: 24023600, LSNCommit: 24023128, TxID: 745, HasTxID: true, MessageType: "INSERT", TsUsec: 1761123456789012}},
		{"no lsn_commit falls back to lsn_proc", `{"lsn_proc":100,"messageType":"INSERT","lsn":100,"txId":4294967295}`, dbzoffset.Offset{LSN: 100, LSNProc: 100, LSNCommit: 100, TxID: 4294967295, HasTxID: true, MessageType: "INSERT"}},
		{"snapshot running", `{"last_snapshot_record":false,"lsn":100,"txId":5,"ts_usec":1,"snapshot":"INITIAL","snapshot_completed":false}`, dbzoffset.Offset{LSN: 100, TxID: 5, HasTxID: true, TsUsec: 1, Snapshot: true}},
		{"old snapshot flag", `{"last_snapshot_record":true,"lsn":100,"txId":5,"ts_usec":1,"snapshot":true}`, dbzoffset.Offset{LSN: 100, TxID: 5, HasTxID: true, TsUsec: 1, Snapshot: true}},
		{"snapshot completed", `{"lsn":100,"lsn_proc":100,"snapshot":"INITIAL","snapshot_completed":true}`, dbzoffset.Offset{LSN: 100, LSNProc: 100, LSNCommit: 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := dbzoffset.Parse([]byte(tc.value))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Parse(%s)\n got %+v\nwant %+v", tc.value, got, tc.want)
			}
		})
	}
}

func TestParseMalformed(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"not JSON", `lsn=1`},
		{"array", `[1,2]`},
		{"null", `null`},
		{"string LSN", `{"lsn":"0/16B3748"}`},
		{"fraction", `{"lsn":1.5}`},
		{"negative", `{"lsn_commit":-1}`},
		{"xid too large", `{"txId":4294967296}`},
		{"unknown type", `{"messageType":"UPSERT"}`},
		{"type not a string", `{"messageType":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if o, err := dbzoffset.Parse([]byte(tc.value)); !errors.Is(err, dbzoffset.ErrMalformed) {
				t.Errorf("Parse(%s) = %+v, %v; want ErrMalformed", tc.value, o, err)
			}
		})
	}
}

func TestKey(t *testing.T) {
	k := dbzoffset.Key{Connector: "outbox-connector", Server: "dbserver1"}
	if got, want := string(k.Bytes()), `["outbox-connector",{"server":"dbserver1"}]`; got != want {
		t.Errorf("Bytes() = %s, want %s", got, want)
	}
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{`["outbox-connector",{"server":"dbserver1"}]`, true},
		{"[ \"outbox-connector\" , {\n \"server\" : \"dbserver1\" } ]", true},
		{`["outbox-connector",{"server":"dbserver1","database":"x"}]`, true},
		{`["outbox-connector",{"db":"dbserver1"}]`, false},
		{`["outbox-connector",{"server":1}]`, false},
		{`["outbox-connector"]`, false},
		{`{"server":"dbserver1"}`, false},
		{`not json`, false},
	} {
		got, ok := dbzoffset.ParseKey([]byte(tc.key))
		if ok != tc.ok || (ok && got != k) {
			t.Errorf("ParseKey(%s) = %+v, %v; want %+v, %v", tc.key, got, ok, k, tc.ok)
		}
	}
}

// What Debezium's restart skips (WalPositionLocator), as a Position.
func TestPosition(t *testing.T) {
	open := func(xid uint32, lsn pglogrepl.LSN, n int) *dbzoffset.Open {
		return &dbzoffset.Open{Xid: xid, LSN: lsn, Events: n}
	}
	for _, tc := range []struct {
		name  string
		value string
		want  dbzoffset.Position
	}{
		{"inside a transaction", insertValue, dbzoffset.Position{Through: 24023128, Open: open(745, 24023600, 1)}},
		{"after a commit", commitValue, dbzoffset.Position{Through: 24023900}},
		{"no counter", oldValue, dbzoffset.Position{Through: 24023128, Open: open(745, 24023600, 1)}},
		{"third row of a COPY", `{"lsn_proc":500,"lsn_events_processed":3,"messageType":"INSERT","lsn_commit":400,"lsn":500,"txId":9}`, dbzoffset.Position{Through: 400, Open: open(9, 500, 3)}},
		{"a delete", `{"lsn_proc":500,"messageType":"DELETE","lsn_commit":400,"lsn":500,"txId":9}`, dbzoffset.Position{Through: 400, Open: open(9, 500, 1)}},
		{"begin", `{"lsn_proc":500,"messageType":"BEGIN","lsn_commit":400,"lsn":500,"txId":9}`, dbzoffset.Position{Through: 400}},
		{"no type", `{"lsn_proc":500,"lsn_commit":400,"lsn":500,"txId":9}`, dbzoffset.Position{Through: 400}},
		{"non-transactional message", `{"lsn_proc":500,"messageType":"MESSAGE","lsn_commit":500,"lsn":500}`, dbzoffset.Position{Through: 500}},
		{"transactional message", `{"lsn_proc":500,"messageType":"MESSAGE","lsn_commit":400,"lsn":500,"txId":9}`, dbzoffset.Position{Through: 400, Open: open(9, 500, 1)}},
		{"lsn_commit from lsn_proc", `{"lsn_proc":500,"messageType":"INSERT","lsn":500,"txId":9}`, dbzoffset.Position{Through: 500, Open: open(9, 500, 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := dbzoffset.Parse([]byte(tc.value))
			if err != nil {
				t.Fatal(err)
			}
			got, err := o.Position()
			if err != nil {
				t.Fatal(err)
			}
			if got.Through != tc.want.Through || (got.Open == nil) != (tc.want.Open == nil) || (got.Open != nil && *got.Open != *tc.want.Open) {
				t.Errorf("Position() = %+v (open %+v), want %+v (open %+v)", got, got.Open, tc.want, tc.want.Open)
			}
		})
	}
}

func TestPositionUnsupported(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"snapshot running", `{"lsn":100,"lsn_proc":100,"txId":5,"snapshot":"INITIAL","snapshot_completed":false}`, "initial snapshot"},
		{"no lsn_proc nor lsn_commit", `{"lsn":100,"txId":5,"messageType":"INSERT"}`, "neither lsn_proc nor lsn_commit"},
		{"row without txId", `{"lsn":100,"lsn_proc":100,"lsn_commit":50,"messageType":"INSERT"}`, "no txId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := dbzoffset.Parse([]byte(tc.value))
			if err != nil {
				t.Fatal(err)
			}
			if p, err := o.Position(); !errors.Is(err, dbzoffset.ErrUnsupported) || !contains(err, tc.want) {
				t.Errorf("Position() = %+v, %v; want ErrUnsupported saying %q", p, err, tc.want)
			}
		})
	}
}
