// Package charttest renders walrelay's Helm chart (deploy/helm/walrelay) with
// Helm's Go SDK, without a cluster, decodes every object strictly into its
// Kubernetes (k8s.io/api) or Prometheus Operator (monitoring/v1) type, and
// checks the invariants the chart promises: probes that never restart a
// standby, a locked-down container, secrets only as read-only files, GOMEMLIMIT,
// a disruption budget and a rollout that a never-Ready standby cannot block,
// and alerts and a dashboard equal to docs/.
//
// It is a module of its own so that walrelay's go.mod does not take Helm's
// and Kubernetes' dependency trees. It does not install anything or talk to
// a cluster: what the API server would default or admit is out of reach.
package charttest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Objects is one rendering of the chart, decoded: each kind the chart
// renders, by name.
type Objects struct {
	Deployments     []*appsv1.Deployment
	ConfigMaps      []*corev1.ConfigMap
	Services        []*corev1.Service
	ServiceAccounts []*corev1.ServiceAccount
	PDBs            []*policyv1.PodDisruptionBudget
	NetworkPolicies []*networkingv1.NetworkPolicy
	ServiceMonitors []*monitoringv1.ServiceMonitor
	PrometheusRules []*monitoringv1.PrometheusRule
}

// Render renders the chart in chartDir with the values files given (none:
// the chart's defaults) as the release releaseName would be installed, and
// decodes every object strictly: a field its type does not know is an error.
func Render(chartDir, releaseName string, valuesFiles ...string) (*Objects, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", chartDir, err)
	}
	vals := map[string]any{}
	for _, f := range valuesFiles {
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading values %s: %w", f, err)
		}
		vals = chartutil.CoalesceTables(v.AsMap(), vals)
	}
	rv, err := chartutil.ToRenderValues(chrt, vals, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: "outbox", Revision: 1, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("composing values: %w", err)
	}
	out, err := engine.Render(chrt, rv)
	if err != nil {
		return nil, fmt.Errorf("rendering chart: %w", err)
	}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	sort.Strings(names)
	objs := &Objects{}
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue // NOTES.txt, _helpers.tpl
		}
		for i, doc := range splitDocs(out[name]) {
			if err := objs.add([]byte(doc)); err != nil {
				return nil, fmt.Errorf("%s, document %d: %w", name, i, err)
			}
		}
	}
	return objs, nil
}

// splitDocs splits a rendered template into its YAML documents, dropping
// those holding only comments or nothing.
func splitDocs(s string) []string {
	var docs []string
	for _, d := range strings.Split("\n"+s, "\n---") {
		empty := true
		for _, line := range strings.Split(d, "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				empty = false
				break
			}
		}
		if !empty {
			docs = append(docs, d)
		}
	}
	return docs
}

// add decodes one document strictly into the type its apiVersion and kind
// name.
func (o *Objects) add(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return fmt.Errorf("reading apiVersion and kind: %w", err)
	}
	strict := func(v any) error {
		if err := yaml.UnmarshalStrict(doc, v); err != nil {
			return fmt.Errorf("decoding %s %s strictly: %w", tm.APIVersion, tm.Kind, err)
		}
		return nil
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		return decodeInto(&o.Deployments, strict)
	case "v1 ConfigMap":
		return decodeInto(&o.ConfigMaps, strict)
	case "v1 Service":
		return decodeInto(&o.Services, strict)
	case "v1 ServiceAccount":
		return decodeInto(&o.ServiceAccounts, strict)
	case "policy/v1 PodDisruptionBudget":
		return decodeInto(&o.PDBs, strict)
	case "networking.k8s.io/v1 NetworkPolicy":
		return decodeInto(&o.NetworkPolicies, strict)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return decodeInto(&o.ServiceMonitors, strict)
	case "monitoring.coreos.com/v1 PrometheusRule":
		return decodeInto(&o.PrometheusRules, strict)
	}
	return fmt.Errorf("unexpected object %q %q: add its type to charttest", tm.APIVersion, tm.Kind)
}

// repoFile reads a file of the walrelay repository, relative to its root
// (this package is deploy/helm/charttest).
func repoFile(rel string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", filepath.FromSlash(rel)))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", rel, err)
	}
	return b, nil
}

// equalYAML reports whether two YAML (or JSON) texts hold the same data.
func equalYAML(a, b []byte) (bool, error) {
	var x, y any
	if err := yaml.Unmarshal(a, &x); err != nil {
		return false, err
	}
	if err := yaml.Unmarshal(b, &y); err != nil {
		return false, err
	}
	jx, err := yaml.Marshal(x)
	if err != nil {
		return false, err
	}
	jy, err := yaml.Marshal(y)
	if err != nil {
		return false, err
	}
	return bytes.Equal(jx, jy), nil
}

// decodeInto decodes a document (with strict) into a new T appended to
// list.
func decodeInto[T any](list *[]*T, strict func(any) error) error {
	v := new(T)
	*list = append(*list, v)
	return strict(v)
}
