package monitoring_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The monitoring artifacts, relative to this package's directory.
var (
	docsDir       = filepath.Join("..", "..", "docs")
	metricsDoc    = filepath.Join(docsDir, "metrics.md")
	runbookDoc    = filepath.Join(docsDir, "runbook.md")
	dashboardFile = filepath.Join(docsDir, "grafana", "walrelay.json")
	rulesDir      = filepath.Join(docsDir, "prometheus")
	alertsFile    = filepath.Join(rulesDir, "alerts.yml")
	ruleTestsFile = filepath.Join(rulesDir, "alerts_test.yml")
)

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return b
}

// ruleFile is a Prometheus rule file, decoded strictly: a field this test
// does not know (keep_firing_for, record rules, ...) fails loudly instead
// of being dropped when the file is rewritten.
type ruleFile struct {
	Groups []ruleGroup `yaml:"groups"`
}

type ruleGroup struct {
	Name     string `yaml:"name"`
	Interval string `yaml:"interval,omitempty"`
	Rules    []rule `yaml:"rules"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

func loadRules(t *testing.T) ruleFile {
	t.Helper()
	var rf ruleFile
	dec := yaml.NewDecoder(bytes.NewReader(readFile(t, alertsFile)))
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		t.Fatalf("decoding %s: %v", alertsFile, err)
	}
	return rf
}

func (rf ruleFile) alerts() []rule {
	var out []rule
	for _, g := range rf.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	Title         string  `json:"title"`
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *datasourceRef `json:"datasource"`
	Targets    []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Datasource *datasourceRef `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"` // a string, or {"query": "..."} for query variables
	Datasource *datasourceRef  `json:"datasource"`
	IncludeAll bool            `json:"includeAll"`
	AllValue   string          `json:"allValue"`
}

// queryText returns a query variable's query string.
func (v variable) queryText() (string, error) {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s, nil
	}
	var obj struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(v.Query, &obj); err != nil {
		return "", fmt.Errorf("variable %q: query is neither a string nor an object: %w", v.Name, err)
	}
	return obj.Query, nil
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(readFile(t, dashboardFile)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s is not valid JSON for a dashboard: %v", dashboardFile, err)
	}
	return d
}

// allPanels returns the dashboard's panels, rows' nested panels included.
func (d dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// dashQuery is one PromQL query of the dashboard.
type dashQuery struct {
	where string // panel title and refId
	expr  string
}

func (d dashboard) queries() []dashQuery {
	var out []dashQuery
	for _, p := range d.allPanels() {
		for _, tg := range p.Targets {
			out = append(out, dashQuery{where: fmt.Sprintf("panel %q target %s", p.Title, tg.RefID), expr: tg.Expr})
		}
	}
	return out
}

var labelValuesRE = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// labelValues parses a Grafana label_values(selector, label) query.
func labelValues(q string) (sel, label string, err error) {
	m := labelValuesRE.FindStringSubmatch(strings.TrimSpace(q))
	if m == nil {
		return "", "", fmt.Errorf("query %q is not label_values(selector, label)", q)
	}
	return strings.TrimSpace(m[1]), m[2], nil
}

// documented reports whether docs/metrics.md names metric as `metric`
// (a histogram's _bucket, _sum and _count series by the histogram's name).
func documented(doc, metric string) bool {
	names := []string{metric}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(metric, suffix); ok {
			names = append(names, base)
		}
	}
	for _, n := range names {
		if regexp.MustCompile("`" + regexp.QuoteMeta(n) + "[`{]").MatchString(doc) {
			return true
		}
	}
	return false
}
