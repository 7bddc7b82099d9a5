package kafkaconf_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/kafkaconf"
	"github.com/walrelay/walrelay/internal/router"
	"github.com/walrelay/walrelay/internal/testenv"
)

// registries is kafkaconf.Registries for converters c (validated by the
// router first, as config does).
func registries(t *testing.T, c router.Converters) (key, value *kafkaconf.RegistrySide, err error) {
	t.Helper()
	rt, err := router.New(router.DefaultConfig(), c)
	if err != nil {
		t.Fatalf("router: %v", err)
	}
	return kafkaconf.Registries(rt, kafkaconf.RegistryOptions{UserAgent: "walrelay/test"})
}

// The registry clients reach an https registry with the PEM truststore
// (and a PEM keystore holding certificate and key) and a static bearer
// token; key and value share one client when their settings are equal and
// get one each when they differ; no client without an avro converter; a
// truststore that holds no certificate is an error naming the option.
func TestRegistriesTLSAndBearer(t *testing.T) {
	ca := testenv.NewCA(t, "registry-ca")
	reg := testenv.Registry(t, testenv.RegistryTLS(ca), testenv.RegistryBearer("t0ken"))
	leaf := ca.Issue(t, "walrelay")
	keystore := filepath.Join(t.TempDir(), "client.pem")
	certPEM, _ := os.ReadFile(leaf.CertFile)
	keyPEM, _ := os.ReadFile(leaf.KeyFile)
	if err := os.WriteFile(keystore, append(certPEM, keyPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	conv := func(caFile string) router.Converters {
		c := router.DefaultConverters()
		c.Key, c.Value = "avro", "avro"
		c.KeyRegistryURL, c.ValueRegistryURL = reg.URL(), reg.URL()
		c.KeyBearerAuthSource, c.ValueBearerAuthSource = "STATIC_TOKEN", "STATIC_TOKEN"
		c.KeyBearerAuthToken, c.ValueBearerAuthToken = "t0ken", "t0ken"
		c.KeyRegistryCAFile, c.ValueRegistryCAFile = caFile, caFile
		c.KeyRegistryCertFile, c.ValueRegistryCertFile = keystore, keystore
		return c
	}

	key, value, err := registries(t, conv(ca.CertFile(t)))
	if err != nil {
		t.Fatal(err)
	}
	if key == nil || value == nil || key.Client != value.Client {
		t.Fatalf("key %v value %v: want both sides, sharing one client", key, value)
	}
	rep, err := value.Client.Check(t.Context(), nil)
	if err != nil || !rep.Reachable || !rep.AuthOK {
		t.Fatalf("Check over https with the CA and the token: %+v, %v; want reachable and the token accepted", rep, err)
	}

	_, value, err = registries(t, conv(""))
	if err != nil {
		t.Fatal(err)
	}
	if rep, _ := value.Client.Check(t.Context(), nil); rep.Reachable || !strings.Contains(rep.Error, "certificate") {
		t.Errorf("Check without the CA: %+v; want the registry's certificate refused", rep)
	}

	c := conv(ca.CertFile(t))
	c.KeyBearerAuthToken = "other"
	key, value, err = registries(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if key.Client == value.Client {
		t.Error("key and value with different tokens share a client")
	}
	if rep, _ := key.Client.Check(t.Context(), nil); !rep.Reachable || rep.AuthOK {
		t.Errorf("Check with a wrong token: %+v; want reachable with the credentials refused", rep)
	}

	notPEM := filepath.Join(t.TempDir(), "ca.jks")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := registries(t, conv(notPEM)); err == nil || !strings.Contains(err.Error(), "converter key.schema.registry.ssl.truststore.location") {
		t.Errorf("a truststore without a certificate: %v; want an error naming the option", err)
	}

	if key, value, err := registries(t, router.DefaultConverters()); key != nil || value != nil || err != nil {
		t.Errorf("without an avro converter: %v %v %v; want nothing", key, value, err)
	}
}
