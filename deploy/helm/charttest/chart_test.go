package charttest

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// chartDir is the chart under test, relative to this package.
const chartDir = "../walrelay"

// valueSets are the documented ways to install the chart: the defaults and
// every file in examples/ (a new example is tested without being listed).
func valueSets(t *testing.T) map[string][]string {
	t.Helper()
	sets := map[string][]string{"defaults": nil}
	examples, err := filepath.Glob(filepath.Join(chartDir, "examples", "*.yaml"))
	if err != nil {
		t.Fatalf("listing examples: %v", err)
	}
	if len(examples) < 3 {
		t.Fatalf("want the fleet and exactly-once examples in %s/examples, found %v", chartDir, examples)
	}
	for _, f := range examples {
		sets[filepath.Base(f)] = []string{f}
	}
	return sets
}

// render renders the chart in dir with the values files, failing the test
// when Helm or the strict decoding refuses it.
func render(t *testing.T, dir string, values ...string) *Objects {
	t.Helper()
	objs, err := Render(dir, "walrelay-orders", values...)
	if err != nil {
		t.Fatalf("rendering %s with %v: %v", dir, values, err)
	}
	return objs
}

// TestChart renders the chart for the defaults and each example, decodes
// every object strictly (Render), and requires every invariant of Check.
func TestChart(t *testing.T) {
	for name, values := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			objs := render(t, chartDir, values...)
			for _, p := range Check(objs) {
				t.Error(p)
			}
			if len(objs.Services) != 1 || len(objs.NetworkPolicies) != 1 || len(objs.PDBs) != 1 || len(objs.ServiceMonitors) != 1 {
				t.Errorf("want one Service, NetworkPolicy, PodDisruptionBudget and ServiceMonitor, got %d, %d, %d, %d",
					len(objs.Services), len(objs.NetworkPolicies), len(objs.PDBs), len(objs.ServiceMonitors))
			}
		})
	}
}

// TestOneReplica: without a standby the defaults keep every invariant too:
// the rollout's extra pod is the standby that takes over, and a drain may
// evict the one pod (minAvailable 1 would block every drain).
func TestOneReplica(t *testing.T) {
	f := filepath.Join(t.TempDir(), "one.yaml")
	if err := os.WriteFile(f, []byte("replicaCount: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	objs := render(t, chartDir, f)
	if n := *objs.Deployments[0].Spec.Replicas; n != 1 {
		t.Fatalf("replicas %d, want 1", n)
	}
	for _, p := range Check(objs) {
		t.Error(p)
	}
}

// TestExamples pins what each example is for: the fleet's releases differ
// in what identifies a database, one carries the alerts and the dashboard,
// and exactly-once sets the delivery and the release's transactional id.
func TestExamples(t *testing.T) {
	cfgOf := func(t *testing.T, file string) (*Objects, map[string]any) {
		t.Helper()
		objs := render(t, chartDir, filepath.Join(chartDir, "examples", file))
		cfg, problems := walrelayConfig(objs)
		if len(problems) > 0 {
			t.Fatalf("%s: %v", file, problems)
		}
		return objs, cfg
	}
	orders, ocfg := cfgOf(t, "fleet-orders.yaml")
	billing, bcfg := cfgOf(t, "fleet-billing.yaml")
	if len(orders.PrometheusRules) != 1 || len(billing.PrometheusRules) != 0 {
		t.Errorf("fleet: want the alerts in fleet-orders only, got %d and %d PrometheusRules", len(orders.PrometheusRules), len(billing.PrometheusRules))
	}
	for _, key := range []string{"postgres.slot", "kafka.client_id", "relay.dead_letter_topic", "kafka.sasl.username"} {
		if dig(ocfg, key) == dig(bcfg, key) {
			t.Errorf("fleet: %s is %v in both releases", key, dig(ocfg, key))
		}
	}
	_, ecfg := cfgOf(t, "exactly-once.yaml")
	if dig(ecfg, "relay.delivery") != "exactly_once" {
		t.Errorf("exactly-once.yaml: relay.delivery %v", dig(ecfg, "relay.delivery"))
	}
	if id, _ := dig(ecfg, "kafka.transactional_id").(string); id == "" {
		t.Error("exactly-once.yaml: no kafka.transactional_id")
	}
	if dig(ecfg, "kafka.tls.enabled") != true || dig(ecfg, "kafka.tls.key_file") != "/etc/walrelay/secrets/kafka/tls.key" {
		t.Errorf("exactly-once.yaml: kafka.tls %v, want enabled with the mounted files", dig(ecfg, "kafka.tls"))
	}
}

// TestCopiesEqualDocs: the chart carries copies of docs/prometheus/alerts.yml
// and docs/grafana/walrelay.json (Helm reads files only inside the chart), and
// what it renders from them equals docs/.
func TestCopiesEqualDocs(t *testing.T) {
	for _, f := range []struct{ doc, copy string }{
		{"docs/prometheus/alerts.yml", "files/alerts.yml"},
		{"docs/grafana/walrelay.json", "files/walrelay.json"},
	} {
		want, err := repoFile(f.doc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(chartDir, f.copy))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("deploy/helm/walrelay/%s differs from %s: cp %s deploy/helm/walrelay/%s", f.copy, f.doc, f.doc, f.copy)
		}
	}
	objs := render(t, chartDir)
	if msg := renderedEqualDocs(objs); msg != "" {
		t.Error(msg)
	}
}

// renderedEqualDocs compares the rendered PrometheusRule's groups with
// docs/prometheus/alerts.yml and the dashboard ConfigMap with
// docs/grafana/walrelay.json; "" when both are equal.
func renderedEqualDocs(objs *Objects) string {
	alerts, err := repoFile("docs/prometheus/alerts.yml")
	if err != nil {
		return err.Error()
	}
	if len(objs.PrometheusRules) != 1 {
		return "alerts: no PrometheusRule"
	}
	var doc struct {
		Groups json.RawMessage `json:"groups"`
	}
	if err := yaml.Unmarshal(alerts, &doc); err != nil {
		return "alerts: reading docs/prometheus/alerts.yml: " + err.Error()
	}
	got, err := json.Marshal(objs.PrometheusRules[0].Spec.Groups)
	if err != nil {
		return err.Error()
	}
	if eq, err := equalYAML(got, doc.Groups); err != nil || !eq {
		return "alerts: the PrometheusRule's groups differ from docs/prometheus/alerts.yml's"
	}
	dash, err := repoFile("docs/grafana/walrelay.json")
	if err != nil {
		return err.Error()
	}
	for _, cm := range objs.ConfigMaps {
		if v, ok := cm.Data["walrelay.json"]; ok {
			if v != string(dash) {
				return "dashboard: ConfigMap " + cm.Name + " differs from docs/grafana/walrelay.json"
			}
			if cm.Labels["grafana_dashboard"] != "1" {
				return "dashboard: ConfigMap " + cm.Name + " lacks the label grafana_dashboard: \"1\""
			}
			return ""
		}
	}
	return "dashboard: no ConfigMap holds walrelay.json"
}

// TestPromtoolChecksRenderedRules runs promtool check rules on the rendered
// PrometheusRule's spec.
func TestPromtoolChecksRenderedRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("WALRELAY_REQUIRE_PROMTOOL") != "" {
			t.Fatalf("promtool not found and WALRELAY_REQUIRE_PROMTOOL is set: run make deps (apt-get install prometheus)")
		}
		t.Skip("promtool not found (make deps installs it); set WALRELAY_REQUIRE_PROMTOOL=1 to make this a failure")
	}
	objs := render(t, chartDir)
	if len(objs.PrometheusRules) != 1 {
		t.Fatalf("want 1 PrometheusRule, got %d", len(objs.PrometheusRules))
	}
	spec, err := yaml.Marshal(objs.PrometheusRules[0].Spec)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(f, spec, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	t.Logf("promtool: %s", strings.TrimSpace(string(out)))
}

// TestChecksCatchMutations proves the checks can fail: each case copies the
// chart, removes or breaks one thing, renders the defaults, and requires
// Check (or the docs comparison) to report it.
func TestChecksCatchMutations(t *testing.T) {
	for _, tc := range []struct {
		name      string
		file      string // in the chart
		old, new  string
		all       bool   // replace every occurrence (pod and container)
		wantMatch string // a substring of the problem reported
	}{
		{"liveness probe removed", "templates/deployment.yaml",
			"          livenessProbe:\n            httpGet:\n              path: /healthz\n              port: http-metrics\n            {{- toYaml .Values.probes.liveness | nindent 12 }}\n", "",
			false, "probes: no liveness probe"},
		{"liveness probe on /readyz", "templates/deployment.yaml",
			"          livenessProbe:\n            httpGet:\n              path: /healthz", "          livenessProbe:\n            httpGet:\n              path: /readyz",
			false, "probes: the liveness probe asks /readyz"},
		{"readiness probe removed", "templates/deployment.yaml",
			"          readinessProbe:\n            httpGet:\n              path: /readyz?standbyok=true\n              port: http-metrics\n            {{- toYaml .Values.probes.readiness | nindent 12 }}\n", "",
			false, "probes: no readiness probe"},
		{"readiness probe on /readyz: the standby never Ready", "templates/deployment.yaml",
			"              path: /readyz?standbyok=true\n", "              path: /readyz\n",
			false, "probes: the readiness probe asks /readyz, want /readyz?standbyok=true"},
		{"listener left on loopback", "templates/_helpers.tpl",
			`(printf "0.0.0.0:%v" .Values.metrics.port)`, `(printf "127.0.0.1:%v" .Values.metrics.port)`,
			false, "walrelay listens on \"127.0.0.1:9814\""},
		{"container securityContext removed", "templates/deployment.yaml",
			"          securityContext:\n            {{- toYaml .Values.securityContext | nindent 12 }}\n", "",
			false, "security: the container has no securityContext"},
		{"readOnlyRootFilesystem removed", "values.yaml",
			"  readOnlyRootFilesystem: true\n", "",
			false, "security: readOnlyRootFilesystem is not true"},
		{"allowPrivilegeEscalation removed", "values.yaml",
			"  allowPrivilegeEscalation: false\n", "",
			false, "security: allowPrivilegeEscalation is not false"},
		{"capabilities kept", "values.yaml",
			"    drop: [ALL]\n", "    drop: []\n",
			false, "security: capabilities do not drop ALL"},
		{"runAsNonRoot removed", "values.yaml",
			"  runAsNonRoot: true\n", "", true,
			"security: runAsNonRoot is not true"},
		{"seccomp profile removed", "values.yaml",
			"  seccompProfile:\n    type: RuntimeDefault\n", "", true,
			"security: seccompProfile is not RuntimeDefault"},
		{"service account token mounted", "templates/deployment.yaml",
			"      automountServiceAccountToken: false\n", "",
			false, "security: the pod mounts a service account token"},
		{"secret volume mount removed", "templates/deployment.yaml",
			"            - name: secrets\n              mountPath: {{ $secretsDir }}\n              readOnly: true\n", "",
			false, "secrets: WALRELAY_POSTGRES_DSN_FILE=/etc/walrelay/secrets/postgres-dsn is not a file of a read-only mounted secret volume"},
		{"secret volume mounted read-write", "templates/deployment.yaml",
			"              mountPath: {{ $secretsDir }}\n              readOnly: true\n", "              mountPath: {{ $secretsDir }}\n              readOnly: false\n",
			false, "is mounted read-write"},
		{"DSN in the environment", "values.yaml",
			"extraEnv: []\n", "extraEnv:\n  - name: WALRELAY_POSTGRES_DSN\n    value: postgres://walrelay:secret@db/app\n",
			false, "secrets: WALRELAY_POSTGRES_DSN holds a secret in the environment"},
		{"GOMEMLIMIT off", "values.yaml",
			"goMemLimitPercent: 90\n", "goMemLimitPercent: 0\n",
			false, "memory: GOMEMLIMIT is not set"},
		{"rollout stops the old pods first", "values.yaml",
			"    maxSurge: 1\n    maxUnavailable: 0\n", "    maxSurge: 0\n    maxUnavailable: \"100%\"\n",
			false, "availability: a rollout stops 2 old pod(s) before new ones are Ready"},
		{"rollout recreates", "values.yaml",
			"  type: RollingUpdate\n  rollingUpdate:\n    maxSurge: 1\n    maxUnavailable: 0\n", "  type: Recreate\n",
			false, "availability: a rollout stops every pod before it starts new ones"},
		{"disruption budget blocks drains", "values.yaml",
			"podDisruptionBudget:\n  enabled: true\n  maxUnavailable: 1\n", "podDisruptionBudget:\n  enabled: true\n  maxUnavailable: 0\n",
			false, "availability: the PodDisruptionBudget never lets a pod be evicted"},
		{"disruption budget lets a drain take both pods", "values.yaml",
			"podDisruptionBudget:\n  enabled: true\n  maxUnavailable: 1\n", "podDisruptionBudget:\n  enabled: true\n  maxUnavailable: \"100%\"\n",
			false, "availability: the PodDisruptionBudget lets a drain evict every pod at once"},
		{"grace shorter than the drain", "values.yaml",
			"terminationGracePeriodSeconds: 45\n", "terminationGracePeriodSeconds: 30\n",
			false, "availability: terminationGracePeriodSeconds 30 is not longer than relay.shutdown_timeout"},
		{"network policy without egress", "templates/networkpolicy.yaml",
			"  policyTypes: [Ingress, Egress]\n", "  policyTypes: [Ingress]\n",
			false, "network: policyTypes [Ingress], want Ingress and Egress"},
		{"service links on", "templates/deployment.yaml",
			"      enableServiceLinks: false\n", "",
			false, "enableServiceLinks is not false"},
		{"standby not scraped", "templates/service.yaml",
			"  publishNotReadyAddresses: true\n", "",
			false, "monitoring: Service walrelay-orders-metrics does not publish not-ready addresses"},
		{"alerts copy edited", "files/alerts.yml",
			"for: 15m", "for: 16m",
			false, "alerts: the PrometheusRule's groups differ"},
		{"dashboard copy edited", "files/walrelay.json",
			`"title": "Slot"`, `"title": "Slots"`,
			false, "dashboard: ConfigMap walrelay-orders-dashboard differs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := mutatedChart(t, tc.file, tc.old, tc.new, tc.all)
			objs := render(t, dir)
			problems := Check(objs)
			if msg := renderedEqualDocs(objs); msg != "" {
				problems = append(problems, msg)
			}
			for _, p := range problems {
				if strings.Contains(p, tc.wantMatch) {
					t.Logf("reported: %s", p)
					return
				}
			}
			t.Errorf("mutation not reported; want a problem containing %q, got %q", tc.wantMatch, problems)
		})
	}
}

// mutatedChart copies the chart to a temporary directory and replaces old
// with new in file, failing when old is not there exactly once (a mutation
// that changes nothing would prove nothing).
func mutatedChart(t *testing.T, file, old, new string, all bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "walrelay")
	if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
		t.Fatalf("copying the chart: %v", err)
	}
	p := filepath.Join(dir, filepath.FromSlash(file))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	n := strings.Count(string(b), old)
	if n == 0 || (n > 1 && !all) {
		t.Fatalf("mutation: %q occurs %d times in %s, want once", old, n, file)
	}
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(b), old, new)), fs.FileMode(0o644)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestStrictDecodingRefusesUnknownFields proves Render's decoding is strict:
// a misspelt field (which the API server would drop, losing the probe)
// fails the rendering.
func TestStrictDecodingRefusesUnknownFields(t *testing.T) {
	dir := mutatedChart(t, "templates/deployment.yaml", "          livenessProbe:\n", "          livenesProbe:\n", false)
	_, err := Render(dir, "walrelay-orders")
	if err == nil || !strings.Contains(err.Error(), `unknown field "livenesProbe"`) {
		t.Fatalf("want an unknown field error, got %v", err)
	}
	t.Logf("refused: %v", err)
}

// TestChartRefusesSecretsInConfig: a secret written into config (and so
// into the ConfigMap) stops the rendering with a message saying where it goes.
func TestChartRefusesSecretsInConfig(t *testing.T) {
	for _, tc := range []struct{ name, values, want string }{
		{"dsn", "config:\n  postgres:\n    dsn: postgres://walrelay:pw@db/app\n", "config.postgres.dsn holds a password"},
		{"sasl password", "config:\n  kafka:\n    sasl:\n      password: pw\n", "config.kafka.sasl.password is a secret"},
		{"registry user info", "config:\n  converter:\n    value.basic.auth.user.info: u:pw\n", "config.converter.value.basic.auth.user.info is a secret"},
		{"memory limit below walrelay's own", "resources:\n  limits:\n    memory: 32Mi\n", "below walrelay's own soft limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(f, []byte(tc.values), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Render(chartDir, "walrelay-orders", f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}

// TestRegistryFilesMustBeMounted: the schema registry's CA named in the
// config but not mounted (its Secret left out) is reported.
func TestRegistryFilesMustBeMounted(t *testing.T) {
	override := filepath.Join(t.TempDir(), "no-ca.yaml")
	if err := os.WriteFile(override, []byte("tls:\n  registry:\n    secretName: \"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	objs := render(t, chartDir, filepath.Join(chartDir, "examples", "schema-registry.yaml"), override)
	want := "secrets: converter.value.schema.registry.ssl.truststore.location=/etc/walrelay/secrets/registry/ca.crt is not a file of a read-only mounted secret volume"
	for _, p := range Check(objs) {
		if strings.Contains(p, want) {
			t.Logf("reported: %s", p)
			return
		}
	}
	t.Errorf("want %q reported, got %q", want, Check(objs))
}
