package config

import (
	"net/url"
	"reflect"
	"regexp"
	"strings"
)

// Redacted returns c with every secret replaced, for printing: the
// passwords in the DSNs, every other option tagged secret (the SASL
// password, the schema registries' user info and tokens) whole, and the
// user info of the schema registries' URLs.
func (c Config) Redacted() Config {
	for _, f := range Fields(&c) {
		if f.value.Kind() != reflect.String || f.value.String() == "" {
			continue
		}
		switch v := f.value.String(); {
		case f.Path == "postgres.dsn" || f.Path == "postgres.primary_dsn":
			f.value.SetString(Redact(v))
		case f.Secret:
			f.value.SetString("xxxxx")
		case strings.HasSuffix(f.Path, ".schema.registry.url"):
			urls := strings.Split(v, ",")
			for i, u := range urls {
				urls[i] = Redact(strings.TrimSpace(u))
			}
			f.value.SetString(strings.Join(urls, ","))
		}
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
