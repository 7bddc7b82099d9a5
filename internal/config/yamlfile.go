package config

// The YAML file: read as a tree of yaml.Nodes and applied option by option
// through parse, the function the environment and the flags go through, so
// a value means the same and an error reads the same whichever source gave
// it (`config postgres.slott (from walrelay.yaml:3): unknown option; did you
// mean postgres.slot?`). Decoding into the struct with yaml.v3 instead
// answered in Go's words (`field slott not found in type config.Postgres`,
// `cannot unmarshal !!int `30` into time.Duration`) and refused a quoted
// number.

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// routerSection is the YAML section of the Outbox Event Router's options,
// where a Debezium connector's transforms.<name>.* settings are pasted.
const routerSection = "router"

// transformsKey starts a Kafka Connect transform's options:
// transforms.<name>.<option>.
const transformsKey = "transforms"

// fileLoader applies one YAML file to the fields of a Config.
type fileLoader struct {
	path     string
	leaves   map[string]Field // option path to its field
	sections map[string]bool  // paths above options: postgres, kafka.tls, router.route
	names    []string         // every option and section path, for suggestions
	sources  map[string]string
	lines    map[string]int // option path to the line that set it in this file
	// transformAs is the Kafka Connect transform name pasted with the
	// router's options (transforms.<name>.*), and transformLine where it
	// was first seen; walrelay has one router.
	transformAs   string
	transformLine int
}

// loadFile reads the YAML file at path and applies each option it sets to
// its field in fields (through parse), recording in sources the file and
// line of each ("walrelay.yaml:12"). Unknown options, values of the wrong
// shape and options set twice are errors naming the option, the file and
// the line.
func loadFile(path string, fields []Field, sources map[string]string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading config file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		// yaml.v3's syntax errors read "yaml: line 3: did not find
		// expected key"; they quote no value.
		return fmt.Errorf("config file %s: not valid YAML: %s", path, boundText(strings.TrimPrefix(oneLine(err.Error()), "yaml: "), maxErrText))
	}
	l := &fileLoader{
		path:     path,
		leaves:   make(map[string]Field, len(fields)),
		sections: map[string]bool{},
		sources:  sources,
		lines:    map[string]int{},
	}
	for _, f := range fields {
		l.leaves[f.Path] = f
		l.names = append(l.names, f.Path)
		for i := range len(f.Path) {
			if f.Path[i] == '.' && !l.sections[f.Path[:i]] {
				l.sections[f.Path[:i]] = true
				l.names = append(l.names, f.Path[:i])
			}
		}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 { // an empty file, or only comments
		return nil
	}
	root := resolve(doc.Content[0])
	switch {
	case isNull(root):
		return nil // "---" or "~" alone
	case root.Kind != yaml.MappingNode:
		return fmt.Errorf("config file %s:%d: a %s, not a mapping of options (postgres: {slot: walrelay}, one key a line)", path, root.Line, kindName(root))
	}
	return l.mapping(root, "")
}

// mapping applies the options of the mapping n, whose keys are under
// prefix ("" at the top, "postgres", "router").
func (l *fileLoader) mapping(n *yaml.Node, prefix string) error {
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], resolve(n.Content[i+1])
		if key.Kind != yaml.ScalarNode {
			return fmt.Errorf("config file %s:%d: a key must be a name, not a %s", l.path, key.Line, kindName(key))
		}
		if key.Tag == "!!merge" { // <<: *defaults
			if err := l.merge(value, prefix); err != nil {
				return err
			}
			continue
		}
		if err := l.entry(key, value, join(prefix, key.Value)); err != nil {
			return err
		}
	}
	return nil
}

// merge applies a YAML merge key's mapping (or sequence of mappings) as if
// its entries were written in place.
func (l *fileLoader) merge(value *yaml.Node, prefix string) error {
	if value.Kind == yaml.SequenceNode {
		for _, m := range value.Content {
			if err := l.merge(resolve(m), prefix); err != nil {
				return err
			}
		}
		return nil
	}
	if value.Kind != yaml.MappingNode {
		return fmt.Errorf("config file %s:%d: << merges a mapping, not a %s", l.path, value.Line, kindName(value))
	}
	return l.mapping(value, prefix)
}

// entry applies key: value, where path is the key's full option path. A
// key may name an option (postgres.slot), a section (postgres, or router's
// route under which topic: replacement: ... continues), or, at the top or
// under router:, a Kafka Connect transform's option as a Debezium
// connector's configuration spells it (transforms.outbox.route.by.field).
func (l *fileLoader) entry(key, value *yaml.Node, path string) error {
	if f, ok := l.leaves[path]; ok {
		return l.leaf(f, key, value)
	}
	if l.sections[path] {
		switch {
		case isNull(value):
			return nil // "kafka:" with nothing under it
		case value.Kind != yaml.MappingNode:
			return &OptionError{Option: path, Source: l.source(key),
				Reason: fmt.Sprintf("a section of options, given a %s; write its options under it, e.g. %s", kindName(value), l.firstUnder(path))}
		}
		return l.mapping(value, path)
	}
	if prefix, name, ok := strings.Cut(path, "."); ok && (prefix == routerSection || prefix == transformsKey) {
		if prefix == transformsKey {
			name = path // transforms.* at the top: the router's too
		}
		if name == transformsKey || strings.HasPrefix(name, transformsKey+".") {
			return l.transform(key, value, path, name)
		}
	} else if path == transformsKey {
		return l.transform(key, value, path, path)
	}
	return &OptionError{Option: path, Source: l.source(key), Reason: "unknown option", Suggestion: suggest(path, l.names)}
}

// transform handles the keys of a Kafka Connect transform pasted from a
// Debezium connector's configuration: transforms (the list of transform
// names) and transforms.<name>.<option>, which is the router's <option>.
// name is the key from "transforms" on; path is the key's full path, for
// errors.
func (l *fileLoader) transform(key, value *yaml.Node, path, name string) error {
	if name == transformsKey {
		// transforms: outbox, the connector's list of transforms.
		// walrelay is one Outbox Event Router: one name is accepted
		// (and must be the one the options use), several explained.
		if value.Kind != yaml.ScalarNode || isNull(value) {
			return &OptionError{Option: path, Source: l.source(key),
				Reason: "the connector's list of transforms, given a " + kindName(value) + "; walrelay is one Outbox Event Router: leave this line out or name that transform alone"}
		}
		names := splitList(value.Value)
		if len(names) != 1 {
			return &OptionError{Option: path, Source: l.source(key),
				Reason: fmt.Sprintf("the connector's list of transforms has %d; walrelay is one Outbox Event Router and runs no other transform: name the router's alone, or leave this line out", len(names))}
		}
		return l.transformName(key, names[0])
	}
	rest := strings.TrimPrefix(name, transformsKey+".")
	tname, option, ok := strings.Cut(rest, ".")
	if !ok || tname == "" || option == "" {
		return &OptionError{Option: path, Source: l.source(key),
			Reason: "a Kafka Connect transform's option is transforms.<name>.<option>, e.g. transforms.outbox.route.by.field"}
	}
	if err := l.transformName(key, tname); err != nil {
		return err
	}
	target := join(routerSection, option)
	if f, ok := l.leaves[target]; ok {
		return l.leaf(f, key, value)
	}
	if l.sections[target] && value.Kind == yaml.MappingNode {
		return l.mapping(value, target)
	}
	var routerNames []string
	for _, n := range l.names {
		if strings.HasPrefix(n, routerSection+".") {
			routerNames = append(routerNames, strings.TrimPrefix(n, routerSection+"."))
		}
	}
	hint := ""
	if s := suggest(option, routerNames); s != "" {
		hint = transformsKey + "." + tname + "." + s
	}
	return &OptionError{Option: path, Source: l.source(key), Reason: "unknown option of the Outbox Event Router", Suggestion: hint}
}

// transformName records the transform name the router's options are
// pasted under and refuses a second one.
func (l *fileLoader) transformName(key *yaml.Node, name string) error {
	if l.transformAs == "" {
		l.transformAs, l.transformLine = name, key.Line
		return nil
	}
	if name != l.transformAs {
		return &OptionError{Option: transformsKey + "." + name, Source: l.source(key),
			Reason: fmt.Sprintf("a second transform (line %d names %s); walrelay is one Outbox Event Router: paste that transform's options alone", l.transformLine, l.transformAs)}
	}
	return nil
}

// leaf applies value to the option f. A scalar goes through parse, as
// the environment's text does (so "2048" and 2048 are the same number);
// a list option also takes a sequence, a map option a mapping. A null
// (nothing after the colon, or ~) is the empty string, list or mapping,
// and an error for an option of another type.
func (l *fileLoader) leaf(f Field, key, value *yaml.Node) error {
	source := l.source(key)
	if prev, ok := l.lines[f.Path]; ok {
		return &OptionError{Option: f.Path, Source: source, Reason: fmt.Sprintf("set twice in the file (also at line %d)", prev)}
	}
	l.lines[f.Path] = key.Line
	// fail reports the node n, a value or an item of one: a scalar as a
	// FieldError with its text, anything else without.
	fail := func(n *yaml.Node, reason string) error {
		where := fmt.Sprintf("%s:%d", l.path, n.Line)
		if n.Kind != yaml.ScalarNode || isNull(n) {
			return &OptionError{Option: f.Path, Source: where, Reason: reason}
		}
		return &FieldError{Field: f.Path, Value: shownValue(f, n), Reason: reason, Source: where}
	}
	v := f.value
	switch {
	case v.Kind() == reflect.Slice:
		switch value.Kind {
		case yaml.SequenceNode:
			items := make([]string, 0, len(value.Content))
			for _, item := range value.Content {
				item = resolve(item)
				if item.Kind != yaml.ScalarNode {
					return fail(item, "a list of single values, and this item is a "+kindName(item))
				}
				if !isNull(item) {
					items = append(items, item.Value)
				}
			}
			v.Set(reflect.ValueOf(items).Convert(v.Type()))
		case yaml.ScalarNode:
			if err := parse(f, scalarText(value), source); err != nil {
				return err
			}
		default:
			return fail(value, "a list: write [a, b] or a,b, not a "+kindName(value))
		}
	case v.Kind() == reflect.Map:
		switch value.Kind {
		case yaml.MappingNode:
			m := make(map[string]string, len(value.Content)/2)
			for i := 0; i+1 < len(value.Content); i += 2 {
				k, val := resolve(value.Content[i]), resolve(value.Content[i+1])
				if k.Kind != yaml.ScalarNode || val.Kind != yaml.ScalarNode {
					return fail(k, "a mapping of names to values ("+mapSyntax+"), and this entry is not one")
				}
				m[k.Value] = scalarText(val)
			}
			v.Set(reflect.ValueOf(m).Convert(v.Type()))
		case yaml.ScalarNode:
			if err := parse(f, scalarText(value), source); err != nil {
				return err
			}
		default:
			return fail(value, "a mapping ("+mapSyntax+"), not a "+kindName(value))
		}
	case value.Kind != yaml.ScalarNode:
		return fail(value, "one value, not a "+kindName(value))
	case isNull(value) && v.Kind() != reflect.String:
		return fail(value, "no value: write one (the default is "+f.Default+"), or leave the line out")
	default:
		s := scalarText(value)
		switch {
		case v.Kind() == reflect.Bool:
			// YAML 1.1's booleans, which yaml.v3 took for a bool too.
			switch strings.ToLower(s) {
			case "yes", "on", "y":
				s = "true"
			case "no", "off", "n":
				s = "false"
			}
		case v.CanInt() && value.Tag == "!!int":
			// 0x10, 0o20, 1_000: YAML's integers, in decimal for parse.
			var n int64
			if err := value.Decode(&n); err == nil {
				s = strconv.FormatInt(n, 10)
			}
		}
		if err := parse(f, s, source); err != nil {
			return err
		}
	}
	l.sources[f.Path] = source
	return nil
}

// source is where key is: "walrelay.yaml:12".
func (l *fileLoader) source(key *yaml.Node) string { return fmt.Sprintf("%s:%d", l.path, key.Line) }

// firstUnder returns the first option under section, for an example.
func (l *fileLoader) firstUnder(section string) string {
	for _, n := range l.names {
		if _, ok := l.leaves[n]; ok && strings.HasPrefix(n, section+".") {
			return n
		}
	}
	return section + ".<option>"
}

// resolve follows an alias (*name) to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// isNull reports a YAML null: nothing after the colon, ~ or null.
func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// scalarText is a scalar's text; "" for a null.
func scalarText(n *yaml.Node) string {
	if isNull(n) {
		return ""
	}
	return n.Value
}

// shownValue is the text of the scalar n for an error about f, redacted
// for a secret.
func shownValue(f Field, n *yaml.Node) string {
	if f.Secret {
		return Redact(n.Value)
	}
	return n.Value
}

// kindName names a node's kind for an error.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "null"
		}
		return "single value"
	}
	return "node"
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}
