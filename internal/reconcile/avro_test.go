package reconcile_test

import (
	"strings"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/reconcile"
)

// verify --republish refuses an avro converter before reading anything:
// it would republish records without the schema registry's id.
func TestRepublishRefusesAvro(t *testing.T) {
	cfg := config.Default()
	cfg.Converter.Value, cfg.Converter.ValueRegistryURL = "avro", "http://127.0.0.1:1"
	until := time.Now()
	_, err := reconcile.Run(t.Context(), cfg, reconcile.Options{Since: until.Add(-time.Hour), Until: until, Republish: true}, nil)
	if err == nil || !strings.Contains(err.Error(), "--republish is not implemented for the avro converter") {
		t.Fatalf("Run with --republish and an avro value converter: %v, want the refusal", err)
	}
}
