package main

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOneKafkaOptionsBuilder: internal/kafkaconf is the one place that
// turns config.Kafka into franz-go options (docs/DESIGN.md, "Where things
// live"). No other production file of the module calls kgo.SeedBrokers,
// kgo.DialTLSConfig, kgo.DialTLS, kgo.Dialer or kgo.SASL, or imports a
// franz-go SASL mechanism (pkg/sasl/...), kprom or kslog: a second
// builder would let the clients drift apart (one without TLS, one without
// the client metrics). Test files and the test and bench harnesses
// (internal/testenv, internal/bench, cmd/walrelay-demo, testdata) build
// their own clients against kfake; the application modules (outbox,
// inbox) have go.mods of their own and cannot import internal packages.
func TestOneKafkaOptionsBuilder(t *testing.T) {
	const root = "../.."
	for _, f := range kafkaOptionBuilders(t, root) {
		t.Errorf("%s: Kafka client options built outside internal/kafkaconf (use its ClientOpts or PublisherConfig)", f)
	}
}

// kafkaOptionBuilders returns "file:line: what" for each place outside
// internal/kafkaconf that builds Kafka connection options.
func kafkaOptionBuilders(t *testing.T, root string) []string {
	t.Helper()
	const builder = "internal/kafkaconf"
	skip := []string{builder, "internal/testenv", "internal/bench", "cmd/walrelay-demo"}
	builds := []string{"SeedBrokers", "DialTLSConfig", "DialTLS", "Dialer", "SASL"}
	var found []string
	parseProductionFiles(t, root, skip, func(fset *token.FileSet, _ string, f *ast.File) {
		kgoName := "" // the file's name for franz-go's kgo, "" if not imported
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			name := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			switch {
			case p == "github.com/twmb/franz-go/pkg/kgo":
				kgoName = name
			case strings.HasPrefix(p, "github.com/twmb/franz-go/pkg/sasl/"),
				p == "github.com/twmb/franz-go/plugin/kprom", p == "github.com/twmb/franz-go/plugin/kslog":
				found = append(found, fset.Position(imp.Pos()).String()+": imports "+p)
			}
		}
		if kgoName == "" {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == kgoName && slices.Contains(builds, sel.Sel.Name) {
				found = append(found, fset.Position(call.Pos()).String()+": calls kgo."+sel.Sel.Name)
			}
			return true
		})
	})
	for i, f := range found {
		if r, err := filepath.Rel(root, f); err == nil {
			found[i] = filepath.ToSlash(r)
		}
	}
	return found
}
