package eoscheckpoint_test

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/eoscheckpoint"
)

// The value is the documented JSON, and Parse reads back what Marshal
// wrote.
func TestMarshalParse(t *testing.T) {
	at := time.Date(2026, 11, 24, 21, 58, 3, 120e6, time.UTC)
	c := eoscheckpoint.Checkpoint{LSN: 0x16B3748, SystemID: "7312", Timeline: 1, Database: "app", Slot: "walrelay",
		Open: &eoscheckpoint.Open{CommitLSN: 0x16B9000, Xid: 812, Rows: 4096}, Written: at}
	want := `{"version":1,"lsn":"0/16B3748","system_id":"7312","timeline":1,"database":"app","slot":"walrelay","open":{"commit_lsn":"0/16B9000","xid":812,"rows":4096},"written_at":"2026-11-24T21:58:03.12Z"}`
	if got := string(c.Marshal()); got != want {
		t.Fatalf("Marshal = %s\nwant      %s", got, want)
	}
	back, err := eoscheckpoint.Parse([]byte(want))
	if err != nil {
		t.Fatal(err)
	}
	if back.LSN != c.LSN || back.SystemID != c.SystemID || back.Timeline != 1 || *back.Open != *c.Open || !back.Written.Equal(at) {
		t.Errorf("Parse = %+v, want %+v", back, c)
	}
	c.Open = nil
	if back, err := eoscheckpoint.Parse(c.Marshal()); err != nil || back.Open != nil {
		t.Errorf("Parse without open = %+v, %v", back, err)
	}
}

// last names the transaction that ends at lsn; a checkpoint without it
// (a walrelay older than the field) still parses, and an unknown commit
// time is not written.
func TestMarshalParseLast(t *testing.T) {
	at := time.Date(2026, 11, 24, 21, 58, 3, 120e6, time.UTC)
	commit := time.Date(2026, 11, 24, 21, 58, 3, 101234e3, time.UTC)
	c := eoscheckpoint.Checkpoint{LSN: 0x16B3748, SystemID: "7312", Timeline: 1,
		Last: &eoscheckpoint.Last{CommitLSN: 0x16B3718, Xid: 811, CommitTime: commit}, Written: at}
	want := `{"version":1,"lsn":"0/16B3748","system_id":"7312","timeline":1,"last":{"commit_lsn":"0/16B3718","xid":811,"commit_time":"2026-11-24T21:58:03.101234Z"},"written_at":"2026-11-24T21:58:03.12Z"}`
	if got := string(c.Marshal()); got != want {
		t.Fatalf("Marshal = %s\nwant      %s", got, want)
	}
	back, err := eoscheckpoint.Parse([]byte(want))
	if err != nil {
		t.Fatal(err)
	}
	if back.Last == nil || back.Last.CommitLSN != 0x16B3718 || back.Last.Xid != 811 || !back.Last.CommitTime.Equal(commit) {
		t.Errorf("Parse last = %+v, want %+v", back.Last, c.Last)
	}
	c.Open = &eoscheckpoint.Open{CommitLSN: 0x16B9000, Xid: 812, Rows: 4096, CommitTime: commit}
	if back, err := eoscheckpoint.Parse(c.Marshal()); err != nil || back.Open == nil || !back.Open.CommitTime.Equal(commit) {
		t.Errorf("Parse of open with a commit time = %+v, %v", back.Open, err)
	}
	c.Open = nil
	c.Last.CommitTime = time.Time{}
	if got, want := string(c.Marshal()), `"last":{"commit_lsn":"0/16B3718","xid":811}`; !strings.Contains(got, want) {
		t.Errorf("Marshal without a commit time = %s, want it to hold %s", got, want)
	}
	if back, err := eoscheckpoint.Parse([]byte(`{"version":1,"lsn":"0/16B3748","system_id":"7312","timeline":1,"written_at":"2026-11-24T21:58:03.12Z"}`)); err != nil || back.Last != nil {
		t.Errorf("Parse of a checkpoint without last = %+v, %v", back, err)
	}
}

// What Parse refuses rather than resume from a wrong position.
func TestParseRejects(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{`not json`, "not JSON"},
		{`{"version":2,"lsn":"0/1","system_id":"1"}`, "version 2"},
		{`{"version":1,"lsn":"0/1"}`, "no system_id"},
		{`{"version":1,"lsn":"zz","system_id":"1"}`, "lsn"},
		{`{"version":1,"lsn":"0/10","system_id":"1","open":{"commit_lsn":"0/8","xid":1,"rows":2}}`, "not after"},
		{`{"version":1,"lsn":"0/10","system_id":"1","open":{"commit_lsn":"0/20","xid":1,"rows":0}}`, "not after"},
		{`{"version":1,"lsn":"0/10","system_id":"1","last":{"commit_lsn":"0/10","xid":1}}`, "does not end at"},
		{`{"version":1,"lsn":"0/10","system_id":"1","last":{"commit_lsn":"x","xid":1}}`, "last.commit_lsn"},
	} {
		if _, err := eoscheckpoint.Parse([]byte(tc.value)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s) = %v, want an error with %q", tc.value, err, tc.want)
		}
	}
}
