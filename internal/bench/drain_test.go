package bench

import (
	"testing"
)

func TestSplitPassword(t *testing.T) {
	cases := []struct {
		name, dsn, conninfo, password string
	}{
		{"url without password", "postgres://walrelay@127.0.0.1:5432/postgres?sslmode=disable", "postgres://walrelay@127.0.0.1:5432/postgres?sslmode=disable", ""},
		{"url with password", "postgres://u:s3cret@db:5432/app", "postgres://u@db:5432/app", "s3cret"},
		{"url password parameter", "postgresql://u@db/app?password=s3cret&sslmode=require", "postgresql://u@db/app?sslmode=require", "s3cret"},
		{"key value", "host=db user=u password=s3cret dbname=app", "host=db user=u dbname=app", "s3cret"},
		{"quoted key value", "host=db password='a b' dbname=app", "host=db dbname=app", "a b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, p := splitPassword(tc.dsn)
			if c != tc.conninfo || p != tc.password {
				t.Fatalf("splitPassword(%q) = %q, %q; want %q, %q", tc.dsn, c, p, tc.conninfo, tc.password)
			}
		})
	}
}
