package kafkaconf

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/walrelay/walrelay/internal/connect/avro"
	"github.com/walrelay/walrelay/internal/router"
	"github.com/walrelay/walrelay/internal/schemareg"
)

// RegistrySide is what the relay needs to finish one side's (key or value)
// Avro: the registry client, how subjects are named, how ids are obtained,
// and whether the payload's JSON is encoded with the registry's schema.
type RegistrySide struct {
	// Client talks to the side's registry; the key and value sides share
	// one when their registry settings are the same.
	Client *schemareg.Client
	// Strategy names the subject (converter.<side>.subject.name.strategy).
	Strategy avro.SubjectStrategy
	// Mode is how an id is obtained (auto.register.schemas,
	// use.latest.version, latest.compatibility.strict, normalize.schemas).
	Mode schemareg.Mode
	// Registry is converter.<side>.avro.schema: registry (issue 36 item 3).
	Registry bool
}

// RegistryOptions are what the registry clients need beyond the
// converter settings.
type RegistryOptions struct {
	// UserAgent of the requests: walrelay/<version>.
	UserAgent string
	// Hooks observe the clients (internal/metrics' SchemaRegistry); nil:
	// none.
	Hooks schemareg.Hooks
	// Log gets the clients' waits and recoveries; nil: discard.
	Log *slog.Logger
}

// registrySettings are the settings of one side that make its client: the
// sides whose settings are equal share a client.
type registrySettings struct {
	urls, user, password, token string
	caFile, certFile            string
}

// Registries builds the schema registry side of each avro converter of rt
// (router.Router.Avro, the options it validated): nil for a side that is
// not avro (and both nil, and no client, when neither is). One client per
// distinct registry configuration (URLs, credentials, TLS): key and value
// normally share it. The secrets (basic.auth.user.info,
// bearer.auth.token) are config's as it loaded them, from the YAML, the
// environment or a _FILE. It makes no request. Errors name the option,
// never a secret.
func Registries(rt *router.Router, o RegistryOptions) (key, value *RegistrySide, err error) {
	clients := map[registrySettings]*schemareg.Client{}
	side := func(isKey bool) (*RegistrySide, error) {
		st, ok := rt.Avro(isKey)
		if !ok {
			return nil, nil
		}
		name := "value"
		if isKey {
			name = "key"
		}
		rs := &RegistrySide{
			Strategy: st.Strategy,
			Mode:     schemareg.Mode{AutoRegister: st.AutoRegister, UseLatest: st.UseLatestVersion, LatestStrict: st.LatestStrict, Normalize: st.Normalize},
			Registry: st.Registry,
		}
		if rs.Registry && st.Strategy != avro.TopicNameStrategy {
			// The subject names the schema to fetch: a record strategy
			// needs the record's name, which only that schema holds.
			return nil, fmt.Errorf("converter %s.avro.schema registry: %s.subject.name.strategy %s cannot name the subject before its schema is known: use TopicNameStrategy", name, name, st.Strategy)
		}
		set := registrySettings{urls: strings.Join(st.URLs, ","), user: st.BasicAuthUser, password: st.BasicAuthPassword,
			token: st.BearerToken, caFile: st.CAFile, certFile: st.CertFile}
		if cl, ok := clients[set]; ok {
			rs.Client = cl
			return rs, nil
		}
		cfg := schemareg.Config{URLs: st.URLs, BearerToken: st.BearerToken, UserAgent: o.UserAgent, Hooks: o.Hooks, Logger: o.Log}
		if st.BasicAuthUser != "" {
			cfg.UserInfo = st.BasicAuthUser + ":" + st.BasicAuthPassword
		}
		var err error
		if st.CAFile != "" || st.CertFile != "" {
			if cfg.TLS, err = pemTLS(st.CAFile, st.CertFile, st.CertFile,
				"converter "+name+".schema.registry.ssl.truststore.location", "converter "+name+".schema.registry.ssl.keystore.location"); err != nil {
				return nil, err
			}
		}
		if rs.Client, err = schemareg.New(cfg); err != nil {
			return nil, fmt.Errorf("converter %s.schema.registry.url: %w", name, err)
		}
		clients[set] = rs.Client
		return rs, nil
	}
	if key, err = side(true); err != nil {
		return nil, nil, err
	}
	if value, err = side(false); err != nil {
		return nil, nil, err
	}
	return key, value, nil
}
