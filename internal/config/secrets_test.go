package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "kafka-password")
	if err := os.WriteFile(pwFile, []byte("s3cret-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dsnFile := filepath.Join(dir, "dsn")
	if err := os.WriteFile(dsnFile, []byte("postgres://walrelay:DsnPassw0rd@db:5432/app\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sasl := []string{"WALRELAY_KAFKA_SASL_MECHANISM=SCRAM-SHA-512", "WALRELAY_KAFKA_SASL_USERNAME=relay"}

	cfg, err := Load(nil, append(sasl, "WALRELAY_KAFKA_SASL_PASSWORD_FILE="+pwFile, "WALRELAY_POSTGRES_DSN_FILE="+dsnFile))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.Kafka.SASL.Password != "s3cret-from-file" {
		t.Errorf("password = %q, want the file's content without the newline", cfg.Kafka.SASL.Password)
	}
	if cfg.Postgres.DSN != "postgres://walrelay:DsnPassw0rd@db:5432/app" {
		t.Errorf("dsn = %q", cfg.Postgres.DSN)
	}
	if out := cfg.String(); strings.Contains(out, "s3cret-from-file") || strings.Contains(out, "DsnPassw0rd") {
		t.Errorf("String() shows a secret:\n%s", out)
	}

	for name, env := range map[string][]string{
		"both set":     append(sasl, "WALRELAY_KAFKA_SASL_PASSWORD=x", "WALRELAY_KAFKA_SASL_PASSWORD_FILE="+pwFile),
		"missing file": append(sasl, "WALRELAY_KAFKA_SASL_PASSWORD_FILE="+filepath.Join(dir, "nope")),
		"not a secret": {"WALRELAY_KAFKA_CLIENT_ID_FILE=" + pwFile},
	} {
		_, err := Load(nil, env)
		if err == nil {
			t.Errorf("%s: Load succeeded", name)
			continue
		}
		if strings.Contains(err.Error(), "s3cret-from-file") {
			t.Errorf("%s: error shows the secret: %v", name, err)
		}
	}
}
