package monitoring_test

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

const datasourceVar = "${datasource}"

// The dashboard is valid JSON, takes its Prometheus datasource from the
// `datasource` variable in every panel and target, has the instance and
// slot variables, and shows what the issue asks for.
func TestDashboardStructure(t *testing.T) {
	d := loadDashboard(t)
	if d.SchemaVersion < 36 || d.Title == "" || d.UID == "" {
		t.Errorf("schemaVersion %d, title %q, uid %q: want schemaVersion >= 36 and a title and uid", d.SchemaVersion, d.Title, d.UID)
	}

	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if ds, ok := vars["datasource"]; !ok || ds.Type != "datasource" || string(ds.Query) != `"prometheus"` {
		t.Errorf("want a variable datasource of type datasource with query prometheus, got %+v", ds)
	}
	for name, wantSel := range map[string]string{"instance": "walrelay_build_info", "slot": "walrelay_slot_held"} {
		v, ok := vars[name]
		if !ok {
			t.Errorf("no %q variable", name)
			continue
		}
		if v.Type != "query" || v.Datasource == nil || v.Datasource.UID != datasourceVar {
			t.Errorf("variable %q: type %q datasource %+v, want a query variable on %s", name, v.Type, v.Datasource, datasourceVar)
		}
		q, err := v.queryText()
		if err != nil {
			t.Error(err)
			continue
		}
		sel, label, err := labelValues(q)
		if err != nil || label != name || !strings.HasPrefix(sel, wantSel) {
			t.Errorf("variable %q query %q, want label_values(%s..., %s) (err %v)", name, q, wantSel, name, err)
		}
	}

	var exprs []string
	for _, p := range d.allPanels() {
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != datasourceVar || p.Datasource.Type != "prometheus" {
			t.Errorf("panel %q: datasource %+v, want {prometheus %s}", p.Title, p.Datasource, datasourceVar)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource == nil || tg.Datasource.UID != datasourceVar || tg.Datasource.Type != "prometheus" {
				t.Errorf("panel %q target %s: datasource %+v, want {prometheus %s}", p.Title, tg.RefID, tg.Datasource, datasourceVar)
			}
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q target %s has no expr", p.Title, tg.RefID)
			}
			exprs = append(exprs, tg.Expr)
		}
	}

	// What the dashboard must show (issue 4): each needs a query reading it.
	all := strings.Join(exprs, "\n")
	for _, want := range []string{
		`walrelay_slot_lag_bytes`, `position="restart"`, `walrelay_slot_safe_wal_size_bytes`, `walrelay_slot_wal_status`,
		`rate(walrelay_events_published_total`,
		`histogram_quantile(0.5, sum by (le) (rate(walrelay_end_to_end_latency_seconds_bucket`,
		`histogram_quantile(0.99, sum by (le) (rate(walrelay_end_to_end_latency_seconds_bucket`,
		`histogram_quantile(0.999, sum by (le) (rate(walrelay_end_to_end_latency_seconds_bucket`,
		`histogram_quantile(0.5, sum by (le) (rate(walrelay_produce_ack_latency_seconds_bucket`,
		`histogram_quantile(0.99, sum by (le) (rate(walrelay_produce_ack_latency_seconds_bucket`,
		`histogram_quantile(0.999, sum by (le) (rate(walrelay_produce_ack_latency_seconds_bucket`,
		`walrelay_in_flight_records`, `walrelay_in_flight_bytes`,
		`walrelay_rows_rejected_total`, `walrelay_publish_errors_total`, `walrelay_slot_poll_errors_total`, `walrelay_reconnects_total`,
		`walrelay_slot_stall_seconds`, `walrelay_slot_held`, `walrelay_slot_active`, `up{`,
		`walrelay_oldest_unpublished_event_age_seconds`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no dashboard query contains %s", want)
		}
	}
}

// Every metric the dashboard (queries and variables) and the alert rules
// read is documented in docs/metrics.md.
func TestReferencedMetricsDocumented(t *testing.T) {
	doc := string(readFile(t, metricsDoc))
	d := loadDashboard(t)
	var sources []dashQuery
	sources = append(sources, d.queries()...)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, err := v.queryText()
		if err != nil {
			t.Fatal(err)
		}
		sel, _, err := labelValues(q)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, dashQuery{where: "variable " + v.Name, expr: sel})
	}
	for _, r := range loadRules(t).alerts() {
		sources = append(sources, dashQuery{where: "alert " + r.Alert, expr: r.Expr})
	}
	names := 0
	for _, s := range sources {
		sels, err := selectors(s.expr)
		if err != nil {
			t.Errorf("%s: %v", s.where, err)
			continue
		}
		if len(sels) == 0 {
			t.Errorf("%s: %q reads no metric", s.where, s.expr)
		}
		for _, sel := range sels {
			if sel.Name == "" {
				t.Errorf("%s: selector %s has no metric name", s.where, sel.Text)
				continue
			}
			names++
			if !documented(doc, sel.Name) {
				t.Errorf("%s reads %s, which docs/metrics.md does not document (as `%s`)", s.where, sel.Name, sel.Name)
			}
		}
	}
	if names < 20 {
		t.Errorf("found only %d metric references; the selector extraction is broken", names)
	}
}

// The alert rules carry a severity, a summary, a description and a
// runbook_url whose anchor is a section of docs/runbook.md; the alerts the
// issue asks for exist.
func TestAlertRules(t *testing.T) {
	rules := loadRules(t).alerts()
	runbook := string(readFile(t, runbookDoc))
	anchors := map[string]bool{}
	for _, l := range strings.Split(runbook, "\n") {
		if h, ok := strings.CutPrefix(l, "## "); ok {
			anchors[githubAnchor(h)] = true
		}
	}
	seen := map[string]bool{}
	for _, r := range rules {
		if r.Alert == "" {
			t.Errorf("rule %q is not an alert", r.Expr)
			continue
		}
		if seen[r.Alert] {
			t.Errorf("alert %s defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
		}
		if _, err := time.ParseDuration(r.For); err != nil {
			t.Errorf("%s: for %q: %v", r.Alert, r.For, err)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		_, anchor, ok := strings.Cut(r.Annotations["runbook_url"], "docs/runbook.md#")
		if !ok || !anchors[anchor] {
			t.Errorf("%s: runbook_url %q does not point at a section of docs/runbook.md (sections: %v)", r.Alert, r.Annotations["runbook_url"], anchors)
		}
		if anchor != strings.ToLower(r.Alert) {
			t.Errorf("%s: runbook anchor %q, want the alert's own section %q", r.Alert, anchor, strings.ToLower(r.Alert))
		}
		if _, err := conditionOperands(r.Expr); err != nil {
			t.Errorf("%s: %v", r.Alert, err)
		}
	}
	for _, want := range []string{"WalrelaySlotLagHigh", "WalrelayStalled", "WalrelaySlotInactive", "WalrelayWALStatusAtRisk",
		"WalrelaySafeWALSizeLow", "WalrelayPublishErrors", "WalrelayEndToEndLatencyHigh", "WalrelayDown",
		"WalrelayUnpublishedEventOld"} {
		if !seen[want] {
			t.Errorf("no alert %s", want)
		}
	}
}

// githubAnchor is the anchor GitHub gives a Markdown heading.
func githubAnchor(heading string) string {
	h := strings.ToLower(strings.TrimSpace(heading))
	h = regexp.MustCompile(`[^a-z0-9 _-]`).ReplaceAllString(h, "")
	return strings.ReplaceAll(h, " ", "-")
}

// alerts_test.yml has, for every alert, a case where it fires and one where
// it stays quiet (promtool itself runs them in TestPromtool).
func TestRuleUnitTestsCoverEveryAlert(t *testing.T) {
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.NewDecoder(bytes.NewReader(readFile(t, ruleTestsFile))).Decode(&tests); err != nil {
		t.Fatalf("decoding %s: %v", ruleTestsFile, err)
	}
	if !slices.Contains(tests.RuleFiles, "alerts.yml") {
		t.Errorf("%s tests rule files %v, want alerts.yml", ruleTestsFile, tests.RuleFiles)
	}
	// quiet needs a scenario (a test group with its own series) in which
	// the alert never fires, not just an evaluation before a `for:` ran out.
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		firesHere := map[string]bool{}
		for _, a := range tc.AlertRuleTest {
			firesHere[a.Alertname] = firesHere[a.Alertname] || len(a.ExpAlerts) > 0
		}
		for name, f := range firesHere {
			fires[name] = fires[name] || f
			quiet[name] = quiet[name] || !f
		}
	}
	for _, r := range loadRules(t).alerts() {
		if !fires[r.Alert] {
			t.Errorf("%s: no promtool case where it fires", r.Alert)
		}
		if !quiet[r.Alert] {
			t.Errorf("%s: no promtool test group where it stays quiet", r.Alert)
		}
	}
}
