package charttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWalrelayAcceptsRenderedConfig builds walrelay from this repository and
// runs `walrelay config` (which loads and validates the configuration as
// `walrelay run` does, files included, without connecting) on what each
// value set renders: the ConfigMap's walrelay.yaml, the pod's environment,
// and stand-ins for the mounted secret files at the paths the pod names.
// Unknown keys and unknown WALRELAY_* variables are errors to walrelay, so
// this catches a values key walrelay does not have. The last case proves
// the check fails: a misspelt option is refused.
func TestWalrelayAcceptsRenderedConfig(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "walrelay")
	build := exec.Command("go", "build", "-o", bin, "./cmd/walrelay")
	build.Dir = filepath.Join("..", "..", "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building walrelay: %v\n%s", err, out)
	}
	certPEM, keyPEM := selfSigned(t)

	sets := valueSets(t)
	misspelt := filepath.Join(t.TempDir(), "misspelt.yaml")
	if err := os.WriteFile(misspelt, []byte("config:\n  postgres:\n    slott: walrelay\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sets["misspelt option (must fail)"] = []string{misspelt}
	for name, values := range sets {
		t.Run(name, func(t *testing.T) {
			objs := render(t, chartDir, values...)
			out, err := runWalrelayConfig(t, bin, objs, certPEM, keyPEM)
			if values != nil && values[0] == misspelt {
				if err == nil || !strings.Contains(out, "slott") {
					t.Fatalf("walrelay config accepted a misspelt option (err %v):\n%s", err, out)
				}
				t.Logf("refused as it must be: %s", strings.TrimSpace(out))
				return
			}
			if err != nil {
				t.Fatalf("walrelay config refused the rendered configuration: %v\n%s", err, out)
			}
		})
	}
}

// runWalrelayConfig lays out the pod's files under a temporary directory
// (the ConfigMap's walrelay.yaml, a stand-in for every projected secret
// file), rewrites the pod's paths to it, and runs `walrelay config` with the
// container's args and environment.
func runWalrelayConfig(t *testing.T, bin string, objs *Objects, certPEM, keyPEM []byte) (string, error) {
	t.Helper()
	root := t.TempDir()
	const secretsDir = "/etc/walrelay/secrets"
	local := func(s string) string { return strings.ReplaceAll(s, secretsDir, filepath.Join(root, "secrets")) }

	pod := objs.Deployments[0].Spec.Template.Spec
	for _, v := range pod.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.Secret == nil {
				continue
			}
			for _, it := range src.Secret.Items {
				content := []byte("secret")
				switch {
				case it.Path == "postgres-dsn":
					content = []byte("postgres://walrelay@db.internal:5432/app?sslmode=verify-full\n")
				case strings.HasSuffix(it.Path, "-user-info"):
					content = []byte("walrelay:password\n")
				case strings.HasSuffix(it.Path, ".key"):
					content = keyPEM
				case strings.HasSuffix(it.Path, ".crt"):
					content = certPEM
				case strings.HasSuffix(it.Path, ".pem"):
					content = append(append([]byte{}, certPEM...), keyPEM...)
				}
				p := filepath.Join(root, "secrets", filepath.FromSlash(it.Path))
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, content, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	var cfgText string
	for _, cm := range objs.ConfigMaps {
		if s, ok := cm.Data["walrelay.yaml"]; ok {
			cfgText = s
		}
	}
	cfgFile := filepath.Join(root, "walrelay.yaml")
	if err := os.WriteFile(cfgFile, []byte(local(cfgText)), 0o600); err != nil {
		t.Fatal(err)
	}
	c := pod.Containers[0]
	args := []string{"config"}
	for i := 1; i < len(c.Args); i++ { // c.Args: run --config /etc/walrelay/config/walrelay.yaml
		if c.Args[i] == "--config" && i+1 < len(c.Args) {
			args = append(args, "--config", cfgFile)
			i++
			continue
		}
		args = append(args, local(c.Args[i]))
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"HOME=" + root, "PATH=" + os.Getenv("PATH")}
	for _, e := range c.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+local(e.Value))
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// selfSigned returns a certificate and its key, PEM-encoded, for the TLS
// files walrelay config reads and parses.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "charttest"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}
