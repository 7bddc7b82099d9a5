package operator

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/connect/avro"
	"github.com/walrelay/walrelay/internal/kafkaconf"
	"github.com/walrelay/walrelay/internal/router"
	"github.com/walrelay/walrelay/internal/schemareg"
)

// registryTimeout bounds the whole registry check (each request is bounded
// by the client's own timeout too).
const registryTimeout = 30 * time.Second

// checkRegistry checks the schema registry of each avro converter side
// (none when neither side is avro): reachable, the credentials accepted
// (a 401/403 told apart from a registry that is down), its global mode,
// and, for the subjects walrelay will use, their compatibility level and
// mode (READONLY and IMPORT refuse registrations) and latest version.
//
// The subjects checked are those TopicNameStrategy names for the routed
// topics the check knows (topics: the outbox's rows routed, as the Kafka
// check uses them; the dead-letter topic excluded, its records are not
// Avro): <topic>-key and <topic>-value. With a record strategy the subject
// is the record's name, known only from a row's schema: the registry is
// checked, its subjects are not. A subject with no version is fine when
// walrelay registers (auto.register.schemas), and a failure when it must
// find a schema there (auto.register.schemas false, or avro.schema
// registry): every row would be schema_rejected.
func checkRegistry(ctx context.Context, cfg config.Config, rt *router.Router, topics map[string]bool) []Item {
	key, value, err := kafkaconf.Registries(rt, kafkaconf.RegistryOptions{})
	if err != nil {
		return []Item{{Name: "schema registry", Status: Fail, Detail: err.Error(), Fix: "fix the converter's schema registry options"}}
	}
	if key == nil && value == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, registryTimeout)
	defer cancel()
	var names []string
	for t := range topics {
		if t != cfg.Relay.DeadLetterTopic {
			names = append(names, t)
		}
	}
	sort.Strings(names)
	// The sides, grouped by client: key and value usually share one.
	type side struct {
		*kafkaconf.RegistrySide
		isKey bool
	}
	var clients []*schemareg.Client
	sides := map[*schemareg.Client][]side{}
	for _, s := range []side{{key, true}, {value, false}} {
		if s.RegistrySide == nil {
			continue
		}
		if _, ok := sides[s.Client]; !ok {
			clients = append(clients, s.Client)
		}
		sides[s.Client] = append(sides[s.Client], s)
	}
	var items []Item
	for _, cl := range clients {
		defer cl.Close()
		var subjects []string
		needs := map[string]string{} // subject -> why it must exist already ("" when registering is fine)
		for _, s := range sides[cl] {
			if s.Strategy != avro.TopicNameStrategy {
				items = append(items, Item{Name: "schema registry subjects", Status: OK,
					Detail: fmt.Sprintf("converter %s.subject.name.strategy %s names subjects by the record: they are known from the rows' schemas only, and not checked here", sideName(s.isKey), s.Strategy)})
				continue
			}
			for _, t := range names {
				sub, _ := s.Strategy.Subject(t, s.isKey, nil)
				subjects = append(subjects, sub)
				switch {
				case s.Registry:
					needs[sub] = fmt.Sprintf("converter %s.avro.schema is registry: the rows are encoded with its schema", sideName(s.isKey))
				case !s.Mode.AutoRegister:
					needs[sub] = fmt.Sprintf("converter %s.auto.register.schemas is false: walrelay looks the schema up", sideName(s.isKey))
				}
			}
		}
		items = append(items, registryItems(ctx, cl, subjects, needs)...)
	}
	return items
}

// registryItems are one registry's items: the registry itself, then each
// subject.
func registryItems(ctx context.Context, cl *schemareg.Client, subjects []string, needs map[string]string) []Item {
	name := "schema registry " + strings.Join(cl.URLs(), ",")
	rep, err := cl.Check(ctx, subjects)
	switch {
	case err != nil:
		return []Item{{Name: name, Status: Fail, Detail: err.Error(), Fix: "check that the registry answers within " + registryTimeout.String()}}
	case !rep.Reachable:
		return []Item{{Name: name, Status: Fail, Detail: rep.Error,
			Fix: "check converter <side>.schema.registry.url and that the registry is up and reachable from here (walrelay run waits for it: the stream stops meanwhile)"}}
	case !rep.AuthOK:
		return []Item{{Name: name, Status: Fail, Detail: rep.Error,
			Fix: "fix converter <side>.basic.auth.user.info or <side>.bearer.auth.token (or their WALRELAY_CONVERTER_..._FILE), or the principal's permissions in the registry"}}
	}
	items := []Item{{Name: name, Status: OK, Detail: fmt.Sprintf("reachable, credentials accepted; global compatibility %s, mode %s", orNone(rep.Compatibility), orNone(rep.Mode))}}
	switch rep.Mode {
	case "READONLY", "READONLY_OVERRIDE", "IMPORT":
		items[0].Status, items[0].Fix = Fail, "set the registry's mode to READWRITE (PUT /mode): it refuses new schemas in mode "+rep.Mode
	}
	for _, s := range rep.Subjects {
		it := Item{Name: "subject " + s.Subject, Status: OK}
		detail := fmt.Sprintf("compatibility %s, mode %s", orNone(s.Compatibility), orNone(s.Mode))
		if s.Exists {
			detail += fmt.Sprintf(", latest version %d (id %d)", s.LatestVersion, s.LatestID)
		} else {
			detail += ", no schema registered yet"
		}
		switch {
		case len(s.Problems) > 0:
			it.Status, it.Fix = Fail, "fix the subject in the registry (see the detail)"
			detail += ": " + strings.Join(s.Problems, "; ")
		case !s.Exists && needs[s.Subject] != "":
			it.Status, it.Fix = Fail, "register the subject's schema, or let walrelay register it (auto.register.schemas true, avro.schema connect)"
			detail += ": " + needs[s.Subject] + ", so every row would be schema_rejected"
		case !s.Exists:
			detail += "; walrelay registers it (auto.register.schemas)"
		}
		it.Detail = detail
		items = append(items, it)
	}
	return items
}

func sideName(isKey bool) string {
	if isKey {
		return "key"
	}
	return "value"
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
