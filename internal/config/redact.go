package config

import (
	"net/url"
	"regexp"
	"strings"
)

// Redacted returns c with every secret replaced, for printing.
func (c Config) Redacted() Config {
	c.Postgres.DSN = Redact(c.Postgres.DSN)
	c.Postgres.PrimaryDSN = Redact(c.Postgres.PrimaryDSN)
	if c.Kafka.SASL.Password != "" {
		c.Kafka.SASL.Password = "xxxxx"
	}
	return c
}

// Redact returns dsn with any password replaced by "xxxxx", in URL and in
// key=value form. It is what walrelay prints wherever a DSN appears.
func Redact(dsn string) string {
	if !strings.Contains(dsn, "://") {
		return passwordKV.ReplaceAllString(dsn, "${1}xxxxx")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "<unparsable URL, redacted>"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

var passwordKV = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)`)
