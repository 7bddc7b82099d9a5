package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/walrelay/walrelay/pkg/config"
)

// docs/configuration.md documents every option with its default; it must
// say what the code does (the README links it instead of a copy).
func TestOptionsTableMatchesCode(t *testing.T) {
	const doc = "../../docs/configuration.md"
	text, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(text), "<!-- options:begin")
	if !ok {
		t.Fatalf("%s has no options:begin marker", doc)
	}
	_, table, _ := strings.Cut(rest, "-->\n")
	table, _, ok = strings.Cut(table, "<!-- options:end -->")
	if !ok {
		t.Fatalf("%s has no options:end marker", doc)
	}
	def := config.Default()
	if want := optionsTable(config.Fields(&def)); table != want {
		t.Errorf("%s: the options table is stale; replace it with the output of `walrelay config --list`:\n%s", doc, want)
	}
	if n := strings.Count(string(text), "<!-- options:begin"); n != 1 {
		t.Errorf("%s has %d options:begin markers, want 1", doc, n)
	}
}

// The example config in docs/ must load and validate.
func TestExampleConfigLoads(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	config.BindFlags(fs)
	if err := fs.Parse([]string{"--config", "../../docs/walrelay.example.yaml"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(fs, nil)
	if err != nil {
		t.Fatalf("docs/walrelay.example.yaml: %v", err)
	}
	if cfg.Kafka.TopicReplicationFactor != 3 || cfg.Router.AdditionalPlacement != "type:header:eventType" {
		t.Errorf("example config not applied: %+v", cfg)
	}
}

// The README names the Go release go.mod requires, so a newcomer with an
// older Go knows before the build fails.
func TestREADMENamesGoVersion(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := "Go " + string(m[1]) + " or later"; !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not say %q (go.mod's go line)", want)
	}
}
