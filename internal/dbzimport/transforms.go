package dbzimport

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/walrelay/walrelay/internal/router"
)

// routerOptions lists the router's options (Debezium's names) in
// router.Config's order, with whether each is a boolean.
func routerOptions() (names []string, isBool map[string]bool) {
	isBool = map[string]bool{}
	t := reflect.TypeFor[router.Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("yaml")
		names = append(names, name)
		isBool[name] = f.Type.Kind() == reflect.Bool
	}
	return names, isBool
}

// transforms finds the EventRouter among the connector's transforms (the
// first, when there are several) and maps its options onto router.*;
// every other transform and predicate is dropped.
func (im *importer) transforms() {
	list, _ := im.get("transforms")
	names := splitList(list)
	for _, n := range names {
		if strings.TrimSpace(im.conf["transforms."+n+".type"]) == router.EventRouterClass {
			im.routerName = n
			break
		}
	}
	if im.routerName == "" {
		im.drop("transforms", "no transform is "+router.EventRouterClass+": the connector sends Debezium's change events, which walrelay does not produce; walrelay sends outbox events, routed with the EventRouter's defaults (router: below)")
	}
	options, isBool := routerOptions()
	known := map[string]bool{}
	for _, o := range options {
		known[o] = true
	}
	values := map[string]any{}
	for _, opt := range im.keys("transforms.") {
		name, rest, _ := strings.Cut(strings.TrimPrefix(opt, "transforms."), ".")
		v := im.conf[opt]
		switch {
		case name == im.routerName && (rest == "predicate" || rest == "negate"):
			im.drop(opt, "walrelay applies the router to every row of every table of postgres.table; check that the predicate selected exactly those")
		case name == im.routerName && known[rest]:
			if isBool[rest] {
				b, err := parseBool(v)
				if err != nil {
					im.drop(opt, "not true or false")
					continue
				}
				values[rest] = b
			} else {
				values[rest] = v
			}
			im.used[opt] = true
		case name == im.routerName:
			im.drop(opt, "not an option of Debezium's EventRouter")
		case !slices.Contains(names, name):
			im.ignore(opt, fmt.Sprintf("transform %q is not in transforms, so Kafka Connect does not run it either", name))
		case strings.TrimSpace(im.conf["transforms."+name+".type"]) == router.EventRouterClass:
			// Per-table router options, through a predicate per
			// EventRouter: Kafka Connect's feature, not the router's.
			im.drop(opt, fmt.Sprintf("transform %q is a second EventRouter: walrelay applies one router to every table of postgres.table; tables that need other router options need a relay (slot and publication) of their own", name))
		default:
			class := strings.TrimSpace(im.conf["transforms."+name+".type"])
			im.drop(opt, fmt.Sprintf("transform %q (%s) is not the outbox EventRouter, the only transform walrelay runs", name, class))
		}
	}
	for _, opt := range im.keys("predicates") {
		if opt == "predicates" || strings.HasPrefix(opt, "predicates.") {
			im.drop(opt, "predicates choose the records a transform applies to; walrelay applies the router to every row of every table of postgres.table")
		}
	}
	// Apply the options in order, checking each against walrelay's router;
	// the topic regex and replacement go together (the replacement names
	// the regex's groups).
	cfg := router.DefaultConfig()
	cv := reflect.ValueOf(&cfg).Elem()
	field := func(name string) reflect.Value {
		t := cv.Type()
		for i := range t.NumField() {
			if t.Field(i).Tag.Get("yaml") == name {
				return cv.Field(i)
			}
		}
		panic("no router option " + name) // routerOptions and this read the same struct
	}
	var units [][]string
	for _, o := range options {
		switch {
		case values[o] == nil:
		case o == "route.topic.replacement" && values["route.topic.regex"] != nil:
			// applied with route.topic.regex
		case o == "route.topic.regex" && values["route.topic.replacement"] != nil:
			units = append(units, []string{o, "route.topic.replacement"})
		default:
			units = append(units, []string{o})
		}
	}
	for _, unit := range units {
		before := cfg
		for _, o := range unit {
			field(o).Set(reflect.ValueOf(values[o]))
		}
		if _, err := router.New(cfg, router.DefaultConverters()); err != nil {
			cfg = before
			for _, o := range unit {
				im.drop("transforms."+im.routerName+"."+o, "walrelay's router refuses it: "+err.Error())
			}
			continue
		}
		for _, o := range unit {
			comment := ""
			if o == unit[0] && len(im.routerSettings()) == 0 {
				comment = fmt.Sprintf("The options of transform %q (transforms.%s.*), Debezium's EventRouter; the options it does not set have Debezium's defaults.", im.routerName, im.routerName)
			}
			im.set("router."+o, values[o], comment)
		}
	}
	im.routerConf = cfg
}

func (im *importer) routerSettings() []setting {
	var out []setting
	for _, s := range im.settings {
		if strings.HasPrefix(s.path, "router.") {
			out = append(out, s)
		}
	}
	return out
}
