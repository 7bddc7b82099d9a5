package bench

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseBacklogs(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    []Backlog
		wantErr string
	}{
		{"default set", "single:200k,tx100:500k,onetx:1m", []Backlog{{Shape{RowsPerTx: 1}, 200000}, {Shape{RowsPerTx: 100}, 500000}, {Shape{RowsPerTx: 0}, 1000000}}, ""},
		{"tx1 is single", "tx1:10", []Backlog{{Shape{RowsPerTx: 1}, 10}}, ""},
		{"message style", "msg-single:5k,msg-tx100:500k,msg-onetx:1m,tx100:500k", []Backlog{
			{Shape{RowsPerTx: 1, Messages: true}, 5000}, {Shape{RowsPerTx: 100, Messages: true}, 500000},
			{Shape{Messages: true}, 1000000}, {Shape{RowsPerTx: 100}, 500000}}, ""},
		{"bad message shape", "msg-batch:10", nil, "unknown shape"},
		{"message prefix twice", "msg-msg-single:10", nil, "unknown shape"},
		{"spaces and empty items", " single:5 , ,tx10:20", []Backlog{{Shape{RowsPerTx: 1}, 5}, {Shape{RowsPerTx: 10}, 20}}, ""},
		{"missing count", "single", nil, "want shape:N"},
		{"bad shape", "batch:10", nil, "unknown shape"},
		{"tx0", "tx0:10", nil, "unknown shape"},
		{"zero count", "single:0", nil, "positive"},
		{"bad count", "single:ten", nil, "positive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseBacklogs(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseBacklogs(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseBacklogs(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseLives(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    []Live
		wantErr string
	}{
		{"rates and max", "single@2000,tx10@20k,single@max", []Live{{Shape{RowsPerTx: 1}, 2000}, {Shape{RowsPerTx: 10}, 20000}, {Shape{RowsPerTx: 1}, 0}}, ""},
		{"onetx has no rate", "onetx@100", nil, "no steady rate"},
		{"messages are backlogs only", "msg-single@100", nil, "rows only"},
		{"missing rate", "single", nil, "want shape@rate"},
		{"zero rate", "single@0", nil, "positive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseLives(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseLives(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseLives(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestFormatRoundTrip(t *testing.T) {
	d := Default()
	backlogs := append(d.Backlogs, Backlog{Shape{RowsPerTx: 100, Messages: true}, 500000}, Backlog{Shape{Messages: true}, 10})
	bs, err := ParseBacklogs(FormatList(backlogs))
	if err != nil || !reflect.DeepEqual(bs, backlogs) {
		t.Errorf("backlogs %q parse back as %v, %v", FormatList(backlogs), bs, err)
	}
	ls, err := ParseLives(FormatList(append(d.Lives, Live{Shape{RowsPerTx: 1}, 0})))
	if err != nil || !reflect.DeepEqual(ls, append(d.Lives, Live{Shape{RowsPerTx: 1}, 0})) {
		t.Errorf("lives %q parse back as %v, %v", FormatList(d.Lives), ls, err)
	}
}

func TestParseDeliveries(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    []string
		wantErr string
	}{
		{"both", "at_least_once,exactly_once", []string{"at_least_once", "exactly_once"}, ""},
		{"order kept", " exactly_once , at_least_once ", []string{"exactly_once", "at_least_once"}, ""},
		{"one", "exactly_once", []string{"exactly_once"}, ""},
		{"walrelay's spelling only", "exactly-once", nil, "want at_least_once or exactly_once"},
		{"unknown", "at_most_once", nil, "want at_least_once or exactly_once"},
		{"twice", "exactly_once,exactly_once", nil, "given twice"},
		{"empty", " , ", nil, "no delivery mode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseDeliveries(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseDeliveries(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseDeliveries(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}
