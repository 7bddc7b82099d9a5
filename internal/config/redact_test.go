package config_test

// Tests of redacting secrets: DSNs, the config's String and load errors.

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/config"
)

func TestRedact(t *testing.T) {
	cases := []struct {
		name, dsn, want string
		secret          string
	}{
		{"URL userinfo", "postgres://walrelay:S3cret@db:5432/app?sslmode=require", "postgres://walrelay:xxxxx@db:5432/app?sslmode=require", "S3cret"},
		{"URL userinfo escaped", "postgres://u:p%40ss%2Fw@db/app", "postgres://u:xxxxx@db/app", "p%40ss"},
		{"URL empty user", "postgresql://:S3cret@db/app", "postgresql://:xxxxx@db/app", "S3cret"},
		{"URL query", "postgres://u@db/app?password=S3cret&sslmode=disable", "", "S3cret"},
		{"URL userinfo and query", "postgres://u:S3cret@db/app?password=Other1", "", "Other1"},
		{"URL multi-host", "postgres://u:S3cret@h1:5432,h2:5433/app", "postgres://u:xxxxx@h1:5432,h2:5433/app", "S3cret"},
		{"URL unparsable", "postgres://u:S3 cret@db/app", "<unparsable URL, redacted>", "S3"},
		{"URL without password", "postgres://u@db/app", "postgres://u@db/app", ""},
		{"key=value", "host=db user=u password=S3cret dbname=app", "host=db user=u password=xxxxx dbname=app", "S3cret"},
		{"key = value spaced", "host=db password = S3cret dbname=app", "host=db password = xxxxx dbname=app", "S3cret"},
		{"key=value quoted with spaces", "host=db password='S3 cr et' dbname=app", "host=db password=xxxxx dbname=app", "cr et"},
		{"key=value quoted with escaped quote", `host=db password='it\'s S3cret' dbname=app`, "host=db password=xxxxx dbname=app", "S3cret"},
		{"key=value last", "host=db password=S3cret", "host=db password=xxxxx", "S3cret"},
		{"key=value sslpassword", "host=db sslpassword=S3cret", "host=db sslpassword=xxxxx", "S3cret"},
		{"key=value without password", "host=db user=u", "host=db user=u", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := config.Redact(c.dsn)
			if c.want != "" && got != c.want {
				t.Errorf("Redact(%q) = %q, want %q", c.dsn, got, c.want)
			}
			if c.secret != "" && strings.Contains(got, c.secret) {
				t.Errorf("Redact(%q) = %q still holds %q", c.dsn, got, c.secret)
			}
		})
	}
}

func TestStringRedactsDSN(t *testing.T) {
	cfg := config.Default()
	cfg.Postgres.DSN = "postgres://walrelay:S3cretPassw0rd@db/app"
	cfg.Postgres.PrimaryDSN = "postgres://walrelay:Pr1maryPassw0rd@primary/app"
	s := cfg.String()
	if strings.Contains(s, "S3cretPassw0rd") || !strings.Contains(s, "walrelay:xxxxx@db/app") {
		t.Fatalf("String() does not redact the DSN:\n%s", s)
	}
	if strings.Contains(s, "Pr1maryPassw0rd") || !strings.Contains(s, "walrelay:xxxxx@primary/app") {
		t.Fatalf("String() does not redact postgres.primary_dsn:\n%s", s)
	}
	if cfg.Postgres.DSN != "postgres://walrelay:S3cretPassw0rd@db/app" {
		t.Fatal("String() modified the config")
	}
}

// A secret is redacted in errors about it too.
func TestSecretRedactedInLoadErrors(t *testing.T) {
	_, err := load(t, nil, "WALRELAY_POSTGRES_DSN=host=db port=notaport password=S3cretPassw0rd")
	if err == nil || strings.Contains(err.Error(), "S3cretPassw0rd") || !strings.Contains(err.Error(), "postgres.dsn") {
		t.Fatalf("want an error naming postgres.dsn without the password, got %v", err)
	}
}

// Every option tagged secret and the user info of a schema registry URL
// are left out of String (what `walrelay config` prints). The test sets
// each secret it knows and fails when the config has one it does not, so
// a secret added later must be added here.
func TestStringRedactsEverySecret(t *testing.T) {
	cfg := config.Default()
	set := map[string]*string{
		"postgres.dsn":                         &cfg.Postgres.DSN,
		"postgres.primary_dsn":                 &cfg.Postgres.PrimaryDSN,
		"kafka.sasl.password":                  &cfg.Kafka.SASL.Password,
		"converter.key.basic.auth.user.info":   &cfg.Converter.KeyBasicAuthUserInfo,
		"converter.key.bearer.auth.token":      &cfg.Converter.KeyBearerAuthToken,
		"converter.value.basic.auth.user.info": &cfg.Converter.ValueBasicAuthUserInfo,
		"converter.value.bearer.auth.token":    &cfg.Converter.ValueBearerAuthToken,
	}
	for _, f := range config.Fields(&cfg) {
		if _, ok := set[f.Path]; f.Secret && !ok {
			t.Errorf("%s is a secret this test does not set: add it", f.Path)
		}
	}
	for path, field := range set {
		secret := "S3cret-" + strings.ReplaceAll(path, ".", "-")
		if strings.HasSuffix(path, "dsn") {
			secret = "postgres://u:" + secret + "@db/app"
		}
		*field = secret
	}
	cfg.Converter.ValueRegistryURL = "https://sr:S3cret-url1@sr-1:8081, https://sr:S3cret-url2@sr-2:8081"
	s := cfg.String()
	for path := range set {
		if leak := "S3cret-" + strings.ReplaceAll(path, ".", "-"); strings.Contains(s, leak) {
			t.Errorf("String() shows %s's secret %q", path, leak)
		}
	}
	if strings.Contains(s, "S3cret-url") || !strings.Contains(s, "https://sr:xxxxx@sr-1:8081,https://sr:xxxxx@sr-2:8081") {
		t.Errorf("String() does not show the registry URLs with their passwords redacted:\n%s", s)
	}
	if cfg.Converter.ValueBearerAuthToken != "S3cret-converter-value-bearer-auth-token" {
		t.Error("String() modified the config")
	}
}
