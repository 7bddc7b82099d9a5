package javaprops

import (
	"maps"
	"testing"
)

// The cases follow java.util.Properties.load(Reader).
func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string]string
		wantErr bool
	}{
		{in: "a=1\nb = 2\r\nc:3\rd 4", want: map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}},
		{in: "# comment\n! other\n   \n  k  =  v w  ", want: map[string]string{"k": "v w  "}},
		{in: `k\=x=y`, want: map[string]string{"k=x": "y"}},
		{in: "long = a\\\n     b\\\n c", want: map[string]string{"long": "abc"}},
		{in: `u=\u00e9\t|\q`, want: map[string]string{"u": "é\t|q"}},
		{in: `emoji=\uD83D\uDE80!`, want: map[string]string{"emoji": "🚀!"}},
		{in: "dup=1\ndup=2", want: map[string]string{"dup": "2"}},
		{in: "empty\nsep=", want: map[string]string{"empty": "", "sep": ""}},
		{in: "a==b", want: map[string]string{"a": "=b"}},
		{in: "traceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\ntracestate=congo\\=t61rcWkgMzE\n",
			want: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "congo=t61rcWkgMzE"}},
		{in: `bad=\u00zz`, wantErr: true},
		{in: `short=\u12`, wantErr: true},
	}
	for _, tc := range tests {
		got, err := Parse(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("Parse(%q) = %q, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || !maps.Equal(got, tc.want) {
			t.Errorf("Parse(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
