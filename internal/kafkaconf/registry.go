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

// avroConverters are the converter names of Confluent's AvroConverter.
var avroConverters = map[string]bool{"avro": true, "io.confluent.connect.avro.AvroConverter": true}

// IsAvro reports whether a converter.key or converter.value name is the
// avro converter.
func IsAvro(name string) bool { return avroConverters[strings.TrimSpace(name)] }

// registrySettings are the settings of one side that make its client: the
// sides whose settings are equal share a client.
type registrySettings struct {
	urls, userInfo, token string
	caFile, certFile      string
}

// Registries builds the schema registry side of each avro converter of c:
// nil for a side that is not avro (and both nil, and no client, when
// neither is). One client per distinct registry configuration (URLs,
// credentials, TLS): key and value normally share it. The secrets
// (basic.auth.user.info, bearer.auth.token) are c's as config loaded them,
// from the YAML, the environment or a _FILE. It makes no request.
// Errors name the option, never a secret.
func Registries(c router.Converters, o RegistryOptions) (key, value *RegistrySide, err error) {
	clients := map[registrySettings]*schemareg.Client{}
	side := func(name string, s sideOptions) (*RegistrySide, error) {
		if !IsAvro(s.converter) {
			return nil, nil
		}
		set, err := s.settings(name)
		if err != nil {
			return nil, err
		}
		strategy, err := avro.ParseSubjectStrategy(s.strategy)
		if err != nil {
			return nil, fmt.Errorf("converter %s.subject.name.strategy: %w", name, err)
		}
		rs := &RegistrySide{
			Strategy: strategy,
			Mode:     schemareg.Mode{AutoRegister: s.autoRegister, UseLatest: s.useLatest, LatestStrict: s.latestStrict, Normalize: s.normalize},
			Registry: strings.EqualFold(strings.TrimSpace(s.avroSchema), "registry"),
		}
		if rs.Registry && strategy != avro.TopicNameStrategy {
			// The subject names the schema to fetch: a record strategy
			// needs the record's name, which only that schema holds.
			return nil, fmt.Errorf("converter %s.avro.schema registry: %s.subject.name.strategy %s cannot name the subject before its schema is known: use TopicNameStrategy", name, name, strategy)
		}
		if cl, ok := clients[set]; ok {
			rs.Client = cl
			return rs, nil
		}
		cfg := schemareg.Config{UserInfo: set.userInfo, BearerToken: set.token, UserAgent: o.UserAgent, Hooks: o.Hooks, Logger: o.Log}
		for _, u := range strings.Split(set.urls, ",") {
			if u = strings.TrimSpace(u); u != "" {
				cfg.URLs = append(cfg.URLs, u)
			}
		}
		if set.caFile != "" || set.certFile != "" {
			if cfg.TLS, err = pemTLS(set.caFile, set.certFile, set.certFile,
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
	if key, err = side("key", keyOptions(c)); err != nil {
		return nil, nil, err
	}
	if value, err = side("value", valueOptions(c)); err != nil {
		return nil, nil, err
	}
	return key, value, nil
}

// sideOptions are one side's converter options, without its key./value.
// prefix.
type sideOptions struct {
	converter                                       string
	url, basicSource, userInfo, bearerSource, token string
	caFile, caType, certFile, certType              string
	strategy, avroSchema                            string
	autoRegister, useLatest, latestStrict           bool
	normalize                                       bool
}

func keyOptions(c router.Converters) sideOptions {
	return sideOptions{c.Key, c.KeyRegistryURL, c.KeyBasicAuthSource, c.KeyBasicAuthUserInfo, c.KeyBearerAuthSource, c.KeyBearerAuthToken,
		c.KeyRegistryCAFile, c.KeyRegistryCAType, c.KeyRegistryCertFile, c.KeyRegistryCertType,
		c.KeySubjectStrategy, c.KeyAvroSchema, c.KeyAutoRegister, c.KeyUseLatestVersion, c.KeyLatestStrict, c.KeyNormalizeSchemas}
}

func valueOptions(c router.Converters) sideOptions {
	return sideOptions{c.Value, c.ValueRegistryURL, c.ValueBasicAuthSource, c.ValueBasicAuthUserInfo, c.ValueBearerAuthSource, c.ValueBearerAuthToken,
		c.ValueRegistryCAFile, c.ValueRegistryCAType, c.ValueRegistryCertFile, c.ValueRegistryCertType,
		c.ValueSubjectStrategy, c.ValueAvroSchema, c.ValueAutoRegister, c.ValueUseLatestVersion, c.ValueLatestStrict, c.ValueNormalizeSchemas}
}

// settings checks a side's registry options and returns what makes its
// client. Credentials in the URL are used with basic.auth.credentials.source
// URL (schemareg.New reads them from the URL) and refused otherwise, as
// Confluent's client ignores them then (an operator would think them used).
func (s sideOptions) settings(name string) (registrySettings, error) {
	set := registrySettings{urls: strings.TrimSpace(s.url), caFile: s.caFile, certFile: s.certFile}
	if set.urls == "" {
		return set, fmt.Errorf("converter %s is avro: converter %s.schema.registry.url is required", name, name)
	}
	switch src := strings.ToUpper(strings.TrimSpace(s.basicSource)); src {
	case "", "URL":
	case "USER_INFO":
		if s.userInfo == "" {
			return set, fmt.Errorf("converter %s.basic.auth.credentials.source USER_INFO: converter %s.basic.auth.user.info is empty", name, name)
		}
		set.userInfo = s.userInfo
	default:
		return set, fmt.Errorf("converter %s.basic.auth.credentials.source %q: want URL or USER_INFO", name, s.basicSource)
	}
	switch src := strings.ToUpper(strings.TrimSpace(s.bearerSource)); src {
	case "":
	case "STATIC_TOKEN":
		if s.token == "" {
			return set, fmt.Errorf("converter %s.bearer.auth.credentials.source STATIC_TOKEN: converter %s.bearer.auth.token is empty", name, name)
		}
		set.token = s.token
	default:
		return set, fmt.Errorf("converter %s.bearer.auth.credentials.source %q: want STATIC_TOKEN", name, s.bearerSource)
	}
	for _, t := range []struct{ opt, v string }{{"truststore", s.caType}, {"keystore", s.certType}} {
		if v := strings.TrimSpace(t.v); v != "" && !strings.EqualFold(v, "PEM") {
			return set, fmt.Errorf("converter %s.schema.registry.ssl.%s.type %q: walrelay reads PEM files only", name, t.opt, t.v)
		}
	}
	return set, nil
}
