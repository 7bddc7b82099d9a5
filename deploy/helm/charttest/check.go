package charttest

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// secretEnv are walrelay's secret options' environment variables
// (docs/configuration.md): a pod may name a file holding one with the
// variable plus _FILE, never carry the value itself.
var secretEnv = []string{
	"WALRELAY_POSTGRES_DSN",
	"WALRELAY_POSTGRES_PRIMARY_DSN",
	"WALRELAY_KAFKA_SASL_PASSWORD",
	"WALRELAY_CONVERTER_KEY_BASIC_AUTH_USER_INFO",
	"WALRELAY_CONVERTER_VALUE_BASIC_AUTH_USER_INFO",
	"WALRELAY_CONVERTER_KEY_BEARER_AUTH_TOKEN",
	"WALRELAY_CONVERTER_VALUE_BEARER_AUTH_TOKEN",
	"PGPASSWORD",
}

// Check returns every way the rendered chart breaks an invariant, each
// starting with a short name of the invariant (the mutation tests match on
// it); none when it keeps them all.
func Check(o *Objects) []string {
	var problems []string
	report := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if len(o.Deployments) != 1 {
		report("deployment: want 1 Deployment, got %d", len(o.Deployments))
		return problems
	}
	d := o.Deployments[0]
	pod := d.Spec.Template.Spec
	var c *corev1.Container
	for i := range pod.Containers {
		if pod.Containers[i].Name == "walrelay" {
			c = &pod.Containers[i]
		}
	}
	if c == nil {
		report("deployment: no container named walrelay")
		return problems
	}
	cfg, cfgProblems := walrelayConfig(o)
	problems = append(problems, cfgProblems...)

	checkProbes(c, cfg, report)
	checkSecurity(o, &pod, c, report)
	checkSecrets(&pod, c, cfg, report)
	checkMemory(c, cfg, report)
	checkAvailability(o, d, cfg, report)
	checkNetwork(o, report)
	checkMonitoring(o, report)
	return problems
}

// walrelayConfig decodes the walrelay.yaml the chart's ConfigMap holds and
// checks it: loadable YAML, the keys walrelay needs set, no secret.
func walrelayConfig(o *Objects) (map[string]any, []string) {
	var problems []string
	var text string
	n := 0
	for _, cm := range o.ConfigMaps {
		if t, ok := cm.Data["walrelay.yaml"]; ok {
			text, n = t, n+1
		}
	}
	if n != 1 {
		return nil, []string{fmt.Sprintf("config: want 1 ConfigMap with walrelay.yaml, got %d", n)}
	}
	cfg := map[string]any{}
	if err := yaml.UnmarshalStrict([]byte(text), &cfg); err != nil {
		return nil, []string{fmt.Sprintf("config: walrelay.yaml is not loadable YAML: %v", err)}
	}
	for _, key := range []string{"postgres.slot", "postgres.publications", "kafka.brokers", "http.listen"} {
		if v := dig(cfg, key); v == nil || v == "" {
			problems = append(problems, fmt.Sprintf("config: walrelay.yaml does not set %s", key))
		}
	}
	for _, key := range []string{"postgres.dsn", "postgres.primary_dsn", "kafka.sasl.password"} {
		if dig(cfg, key) != nil {
			problems = append(problems, fmt.Sprintf("secrets: walrelay.yaml holds the secret %s", key))
		}
	}
	if conv, ok := cfg["converter"].(map[string]any); ok {
		for k := range conv {
			if strings.HasSuffix(k, "auth.user.info") || strings.HasSuffix(k, "auth.token") {
				problems = append(problems, fmt.Sprintf("secrets: walrelay.yaml holds the secret converter.%s", k))
			}
		}
	}
	return cfg, problems
}

// dig returns the value at a dotted path of a decoded YAML mapping, or nil.
func dig(m map[string]any, dotted string) any {
	var cur any = m
	for _, p := range strings.Split(dotted, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

// checkProbes: liveness on /healthz only, readiness on
// /readyz?standbyok=true, and the probes' port the one walrelay listens on
// inside the pod.
func checkProbes(c *corev1.Container, cfg map[string]any, report func(string, ...any)) {
	port := map[string]int32{}
	for _, p := range c.Ports {
		port[p.Name] = p.ContainerPort
	}
	listen, _ := dig(cfg, "http.listen").(string)
	check := func(what string, p *corev1.Probe, want string) {
		if p == nil {
			report("probes: no %s probe", what)
			return
		}
		if p.HTTPGet == nil {
			report("probes: the %s probe is not an HTTP GET", what)
			return
		}
		if p.HTTPGet.Path != want {
			report("probes: the %s probe asks %s, want %s", what, p.HTTPGet.Path, want)
		}
		num := p.HTTPGet.Port.IntVal
		if p.HTTPGet.Port.Type == intstr.String {
			var ok bool
			if num, ok = port[p.HTTPGet.Port.StrVal]; !ok {
				report("probes: the %s probe's port %q is not a named container port", what, p.HTTPGet.Port.StrVal)
				return
			}
		}
		if wantListen := fmt.Sprintf("0.0.0.0:%d", num); listen != wantListen {
			report("probes: the %s probe asks port %d but walrelay listens on %q (want %s)", what, num, listen, wantListen)
		}
	}
	// A standby's /readyz is 503 for as long as it waits: a liveness or
	// startup probe on it would restart every healthy standby, and a
	// readiness probe on it would leave the standby never available
	// (rollouts that wait for it stall, the budget blocks drains).
	// /readyz?standbyok=true is 200 on the active pod and on a healthy
	// standby.
	check("liveness", c.LivenessProbe, "/healthz")
	check("readiness", c.ReadinessProbe, "/readyz?standbyok=true")
	if c.StartupProbe != nil {
		check("startup", c.StartupProbe, "/healthz")
	}
}

// checkSecurity: a non-root, read-only container without privileges or
// capabilities, the runtime's seccomp profile, no service account token.
func checkSecurity(o *Objects, pod *corev1.PodSpec, c *corev1.Container, report func(string, ...any)) {
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	sc := c.SecurityContext
	if sc == nil {
		report("security: the container has no securityContext")
		sc = &corev1.SecurityContext{}
	}
	nonRoot := sc.RunAsNonRoot
	if nonRoot == nil {
		nonRoot = psc.RunAsNonRoot
	}
	if nonRoot == nil || !*nonRoot {
		report("security: runAsNonRoot is not true")
	}
	uid := sc.RunAsUser
	if uid == nil {
		uid = psc.RunAsUser
	}
	if uid == nil || *uid == 0 {
		report("security: no fixed non-root runAsUser")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		report("security: readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		report("security: allowPrivilegeEscalation is not false")
	}
	if sc.Privileged != nil && *sc.Privileged {
		report("security: the container is privileged")
	}
	if sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) > 0 {
		report("security: capabilities do not drop ALL (and add none)")
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil {
		seccomp = psc.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		report("security: seccompProfile is not RuntimeDefault")
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		report("security: the pod mounts a service account token (automountServiceAccountToken is not false)")
	}
	for _, sa := range o.ServiceAccounts {
		if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			report("security: ServiceAccount %s mounts its token", sa.Name)
		}
	}
}

// checkSecrets: no environment variable carries a secret; every *_FILE
// names a file of a secret projected into a read-only mount; the DSN comes
// from one; the TLS files named in the config (Kafka's, the schema
// registry's) are mounted too.
func checkSecrets(pod *corev1.PodSpec, c *corev1.Container, cfg map[string]any, report func(string, ...any)) {
	// Kubernetes puts <SERVICE>_PORT, <SERVICE>_SERVICE_HOST, ... of every
	// Service in the namespace into the environment unless told not to: a
	// Service named walrelay-* (this release's metrics Service, or another
	// release's in a fleet) yields WALRELAY_* variables, which walrelay
	// refuses as unknown (exit 2).
	if pod.EnableServiceLinks == nil || *pod.EnableServiceLinks {
		report("environment: enableServiceLinks is not false: Services named walrelay-* put unknown WALRELAY_* variables into the environment, and walrelay refuses to start")
	}
	if len(c.EnvFrom) > 0 {
		report("secrets: envFrom puts whole ConfigMaps or Secrets into the environment")
	}
	// The files each volume provides, by path inside it, and whether
	// they are secrets.
	secretFiles := map[string]map[string]bool{}
	for _, v := range pod.Volumes {
		files := map[string]bool{}
		switch {
		case v.Secret != nil:
			for _, it := range v.Secret.Items {
				files[it.Path] = true
			}
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret == nil {
					files = nil
					break
				}
				for _, it := range src.Secret.Items {
					files[it.Path] = true
				}
			}
		default:
			files = nil
		}
		if files != nil {
			secretFiles[v.Name] = files
		}
	}
	// mountedSecret reports whether file is one of a secret volume's
	// files, under a read-only mount.
	mountedSecret := func(file string) (bool, string) {
		for _, m := range c.VolumeMounts {
			files, ok := secretFiles[m.Name]
			if !ok {
				continue
			}
			rel, ok := strings.CutPrefix(path.Clean(file), strings.TrimSuffix(m.MountPath, "/")+"/")
			if !ok || m.SubPath != "" || !files[rel] {
				continue
			}
			if !m.ReadOnly {
				return false, fmt.Sprintf("%s is mounted read-write", m.MountPath)
			}
			return true, ""
		}
		return false, "no read-only secret volume mount provides it"
	}
	var dsnFile bool
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			report("secrets: %s takes a Secret's value into the environment", e.Name)
		}
		for _, s := range secretEnv {
			if e.Name == s {
				report("secrets: %s holds a secret in the environment (use %s_FILE)", e.Name, s)
			}
		}
		if strings.HasSuffix(e.Name, "_FILE") {
			if ok, why := mountedSecret(e.Value); !ok {
				report("secrets: %s=%s is not a file of a read-only mounted secret volume: %s", e.Name, e.Value, why)
			}
			if e.Name == "WALRELAY_POSTGRES_DSN_FILE" {
				dsnFile = true
			}
		}
	}
	if !dsnFile {
		report("secrets: WALRELAY_POSTGRES_DSN_FILE is not set")
	}
	files := []string{"kafka.tls.ca_file", "kafka.tls.cert_file", "kafka.tls.key_file"}
	if conv, ok := cfg["converter"].(map[string]any); ok {
		for k := range conv {
			if strings.HasSuffix(k, ".location") { // the registry's truststore and keystore
				files = append(files, "converter."+k)
			}
		}
	}
	for _, key := range files {
		f, _ := dig(cfg, key).(string)
		if c, ok := strings.CutPrefix(key, "converter."); ok {
			f, _ = cfg["converter"].(map[string]any)[c].(string)
		}
		if f != "" {
			if ok, why := mountedSecret(f); !ok {
				report("secrets: %s=%s is not a file of a read-only mounted secret volume: %s", key, f, why)
			}
		}
	}
}

// checkMemory: GOMEMLIMIT set, below the container's memory limit and not
// below walrelay's own soft limit (4 × relay.max_in_flight_bytes + 16 MiB);
// GOMAXPROCS, if set, equal to relay.max_procs.
func checkMemory(c *corev1.Container, cfg map[string]any, report func(string, ...any)) {
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	v, ok := env["GOMEMLIMIT"]
	if !ok {
		report("memory: GOMEMLIMIT is not set")
		return
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		report("memory: GOMEMLIMIT %q is not a number of bytes", v)
		return
	}
	limit := c.Resources.Limits.Memory()
	if limit.IsZero() {
		report("memory: the container has no memory limit")
	} else if n >= limit.Value() {
		report("memory: GOMEMLIMIT %d is not below the container's memory limit %d", n, limit.Value())
	}
	inflight := int64(4194304)
	if f, ok := dig(cfg, "relay.max_in_flight_bytes").(float64); ok {
		inflight = int64(f)
	}
	if own := 4*inflight + 16<<20; n < own {
		report("memory: GOMEMLIMIT %d is below walrelay's own soft limit %d", n, own)
	}
	if p, ok := env["GOMAXPROCS"]; ok {
		want := "1"
		if f, ok := dig(cfg, "relay.max_procs").(float64); ok {
			want = strconv.Itoa(int(f))
		}
		if p != want {
			report("memory: GOMAXPROCS %s differs from relay.max_procs %s", p, want)
		}
	}
}

// checkAvailability: the pod that streams and a healthy standby are both
// Ready (/readyz?standbyok=true, checkProbes). A rollout starts a new pod
// before it stops an old one (maxUnavailable 0, maxSurge at least 1): a pod
// able to take the slot over is Ready at every step, and a new version
// that never becomes Ready stops the rollout while the old pods relay. The
// disruption budget lets a drain evict one pod at a time, never both (2
// replicas), and the only one (1 replica). The pods get longer than
// relay.shutdown_timeout to drain.
func checkAvailability(o *Objects, d *appsv1.Deployment, cfg map[string]any, report func(string, ...any)) {
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	if replicas < 1 || replicas > 2 {
		report("availability: replicas %d, want 1 or 2", replicas)
	}
	switch s := d.Spec.Strategy; s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		report("availability: a rollout stops every pod before it starts new ones (strategy Recreate): no pod is left to take the slot over, and a new version that cannot start leaves none relaying")
	default:
		maxUnavailable, maxSurge := intstr.FromString("25%"), intstr.FromString("25%") // Kubernetes' defaults
		if s.RollingUpdate != nil && s.RollingUpdate.MaxUnavailable != nil {
			maxUnavailable = *s.RollingUpdate.MaxUnavailable
		}
		if s.RollingUpdate != nil && s.RollingUpdate.MaxSurge != nil {
			maxSurge = *s.RollingUpdate.MaxSurge
		}
		// The Deployment controller rounds maxUnavailable down and
		// maxSurge up.
		mu, err := intstr.GetScaledValueFromIntOrPercent(&maxUnavailable, int(replicas), false)
		if err != nil {
			report("availability: strategy maxUnavailable %s: %v", maxUnavailable.String(), err)
		} else if mu > 0 {
			report("availability: a rollout stops %d old pod(s) before new ones are Ready (maxUnavailable %s, want 0): the active pod may go while no standby is Ready to take the slot, and a new version that cannot start leaves fewer pods relaying", mu, maxUnavailable.String())
		}
		ms, err := intstr.GetScaledValueFromIntOrPercent(&maxSurge, int(replicas), true)
		if err != nil {
			report("availability: strategy maxSurge %s: %v", maxSurge.String(), err)
		} else if ms < 1 {
			report("availability: a rollout adds no pod before it stops one (maxSurge %s, want at least 1)", maxSurge.String())
		}
	}
	for _, pdb := range o.PDBs {
		// The disruption controller: allowed = Ready pods - desired
		// healthy, rounding percentages up; every pod is Ready while the
		// active and the standby are healthy.
		var desired int
		switch {
		case pdb.Spec.MaxUnavailable != nil:
			mu, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(replicas), true)
			if err != nil {
				report("availability: PodDisruptionBudget maxUnavailable: %v", err)
				continue
			}
			desired = max(int(replicas)-mu, 0)
		case pdb.Spec.MinAvailable != nil:
			ma, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(replicas), true)
			if err != nil {
				report("availability: PodDisruptionBudget minAvailable: %v", err)
				continue
			}
			desired = ma
		}
		switch allowed := int(replicas) - desired; {
		case allowed < 1:
			report("availability: the PodDisruptionBudget never lets a pod be evicted (%d Ready pod(s), %d required): node drains block for ever", replicas, desired)
		case replicas > 1 && allowed >= int(replicas):
			report("availability: the PodDisruptionBudget lets a drain evict every pod at once (%d Ready, %d required): the slot is left with no pod to take it over", replicas, desired)
		}
	}
	timeout := 30 * time.Second
	if s, ok := dig(cfg, "relay.shutdown_timeout").(string); ok {
		t, err := time.ParseDuration(s)
		if err != nil {
			report("availability: relay.shutdown_timeout %q: %v", s, err)
		}
		timeout = t
	}
	grace := int64(30)
	if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	if time.Duration(grace)*time.Second <= timeout {
		report("availability: terminationGracePeriodSeconds %d is not longer than relay.shutdown_timeout %s", grace, timeout)
	}
}

// checkNetwork: both directions restricted, ingress only to the metrics
// port, DNS reachable.
func checkNetwork(o *Objects, report func(string, ...any)) {
	if len(o.NetworkPolicies) == 0 {
		return
	}
	np := o.NetworkPolicies[0]
	types := fmt.Sprint(np.Spec.PolicyTypes)
	if !strings.Contains(types, "Ingress") || !strings.Contains(types, "Egress") {
		report("network: policyTypes %s, want Ingress and Egress", types)
	}
	for _, r := range np.Spec.Ingress {
		if len(r.Ports) == 0 || len(r.From) == 0 {
			report("network: an ingress rule admits every port or every source")
		}
		for _, p := range r.Ports {
			if p.Port == nil || p.Port.String() != "http-metrics" {
				report("network: ingress to port %v, want only http-metrics", p.Port)
			}
		}
	}
	dns := false
	for _, r := range np.Spec.Egress {
		if len(r.Ports) == 0 {
			report("network: an egress rule admits every port")
		}
		for _, p := range r.Ports {
			if p.Port != nil && p.Port.IntValue() == 53 && p.Protocol != nil && *p.Protocol == corev1.ProtocolUDP {
				dns = true
			}
		}
	}
	if !dns {
		report("network: no egress to DNS (53/UDP)")
	}
}

// checkMonitoring: every pod is scraped, Ready or not, and as job
// "walrelay" (the alert rules match on it).
func checkMonitoring(o *Objects, report func(string, ...any)) {
	for _, s := range o.Services {
		if !s.Spec.PublishNotReadyAddresses {
			report("monitoring: Service %s does not publish not-ready addresses: a pod that is not Ready (starting, or a standby that cannot reach Postgres) would not be scraped", s.Name)
		}
	}
	for _, sm := range o.ServiceMonitors {
		for _, ep := range sm.Spec.Endpoints {
			job := false
			for _, r := range ep.RelabelConfigs {
				if r.TargetLabel == "job" && r.Replacement != nil && *r.Replacement == "walrelay" {
					job = true
				}
			}
			if !job {
				report("monitoring: ServiceMonitor %s does not set job=\"walrelay\", which the alerts match", sm.Name)
			}
		}
	}
}
