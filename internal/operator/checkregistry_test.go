package operator

import (
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/router"
	"github.com/walrelay/walrelay/internal/testenv"
)

// walrelay check's registry items against testenv's registry: reachable
// with the credentials accepted, each routed topic's subject with its
// compatibility level and mode; a wrong password told apart from a
// registry that is down; a READONLY subject and a subject walrelay must
// find but cannot are failures; the dead-letter topic has no subject.
func TestCheckRegistry(t *testing.T) {
	const topic, dlq = "outbox.event.order", "walrelay.deadletter"
	reg := testenv.Registry(t, testenv.RegistryBasicAuth("walrelay", "s3cret"))
	reg.Register(topic+"-value", `"string"`)
	reg.SetCompat(topic+"-value", "FULL")
	cfgWith := func(userInfo string, mutate func(*config.Config)) config.Config {
		cfg := config.Default()
		cfg.Relay.DeadLetterTopic = dlq
		cfg.Converter.Value = "io.confluent.connect.avro.AvroConverter"
		cfg.Converter.ValueRegistryURL = reg.URL()
		cfg.Converter.ValueBasicAuthSource = "USER_INFO"
		cfg.Converter.ValueBasicAuthUserInfo = userInfo
		if mutate != nil {
			mutate(&cfg)
		}
		return cfg
	}
	topics := map[string]bool{topic: true, dlq: true}
	runCheck := func(t *testing.T, cfg config.Config) []Item {
		t.Helper()
		if err := cfg.Validate(); err != nil {
			t.Fatalf("config: %v", err)
		}
		rt, err := router.New(cfg.Router, cfg.Converter)
		if err != nil {
			t.Fatalf("router: %v", err)
		}
		return checkRegistry(t.Context(), cfg, rt, topics)
	}
	show := func(items []Item) string {
		var b strings.Builder
		for _, it := range items {
			b.WriteString("\n  " + it.Status + " " + it.Name + ": " + it.Detail)
		}
		return b.String()
	}
	find := func(t *testing.T, items []Item, prefix string) Item {
		t.Helper()
		for _, it := range items {
			if strings.HasPrefix(it.Name, prefix) {
				return it
			}
		}
		t.Fatalf("no item %q in%s", prefix, show(items))
		return Item{}
	}

	t.Run("ok", func(t *testing.T) {
		items := runCheck(t, cfgWith("walrelay:s3cret", nil))
		t.Logf("items:%s", show(items))
		if r := find(t, items, "schema registry "); r.Status != OK || !strings.Contains(r.Detail, "credentials accepted") {
			t.Errorf("registry item %+v, want ok with the credentials accepted", r)
		}
		if s := find(t, items, "subject "+topic+"-value"); s.Status != OK || !strings.Contains(s.Detail, "compatibility FULL") || !strings.Contains(s.Detail, "latest version 1") {
			t.Errorf("subject item %+v, want ok with compatibility FULL and latest version 1", s)
		}
		for _, it := range items {
			if strings.Contains(it.Name, dlq) || strings.Contains(it.Name, "-key") {
				t.Errorf("item %+v: the dead-letter topic and a key that is not avro have no subject", it)
			}
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		items := runCheck(t, cfgWith("walrelay:wrong", nil))
		t.Logf("items:%s", show(items))
		r := find(t, items, "schema registry ")
		if r.Status != Fail || !strings.Contains(r.Detail, "refuses walrelay's credentials (HTTP 401)") {
			t.Errorf("registry item %+v, want a failure saying the credentials are refused (401)", r)
		}
		if strings.Contains(show(items), "wrong") {
			t.Errorf("the items show the password:%s", show(items))
		}
	})
	t.Run("subject read-only", func(t *testing.T) {
		reg.SetMode(topic+"-value", "READONLY")
		defer reg.SetMode(topic+"-value", "READWRITE")
		items := runCheck(t, cfgWith("walrelay:s3cret", nil))
		t.Logf("items:%s", show(items))
		if s := find(t, items, "subject "+topic+"-value"); s.Status != Fail || !strings.Contains(s.Detail, "READONLY") {
			t.Errorf("subject item %+v, want a failure naming mode READONLY", s)
		}
	})
	t.Run("key subject missing without auto-register", func(t *testing.T) {
		items := runCheck(t, cfgWith("walrelay:s3cret", func(c *config.Config) {
			c.Converter.Key = "avro"
			c.Converter.KeyRegistryURL = reg.URL()
			c.Converter.KeyBasicAuthSource = "USER_INFO"
			c.Converter.KeyBasicAuthUserInfo = "walrelay:s3cret"
			c.Converter.KeyAutoRegister = false
		}))
		t.Logf("items:%s", show(items))
		if n := strings.Count(show(items), "ok schema registry ") + strings.Count(show(items), "fail schema registry "); n != 1 {
			t.Errorf("%d registry items; key and value share one registry, want 1", n)
		}
		if s := find(t, items, "subject "+topic+"-key"); s.Status != Fail || !strings.Contains(s.Detail, "auto.register.schemas is false") {
			t.Errorf("key subject item %+v, want a failure: walrelay must look up a schema that is not there", s)
		}
	})
	t.Run("down", func(t *testing.T) {
		reg.Down()
		defer reg.Up()
		items := runCheck(t, cfgWith("walrelay:s3cret", nil))
		t.Logf("items:%s", show(items))
		r := find(t, items, "schema registry ")
		if r.Status != Fail || !strings.Contains(r.Detail, "unavailable") || strings.Contains(r.Detail, "credentials") {
			t.Errorf("registry item %+v, want a failure saying the registry is unavailable (not the credentials)", r)
		}
	})
	t.Run("no avro converter", func(t *testing.T) {
		if items := runCheck(t, config.Default()); len(items) != 0 {
			t.Errorf("items without an avro converter:%s", show(items))
		}
	})
}
