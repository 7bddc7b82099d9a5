package config

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// StringList is a list option. The environment and flags give it as one
// comma-separated string; the YAML file as a sequence or, the same way,
// as one string (`brokers: kafka-1:9092,kafka-2:9092`). Items are trimmed
// and empty ones dropped.
type StringList []string

// UnmarshalYAML decodes a sequence of strings, or splits a single string
// on commas.
func (l *StringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = splitList(n.Value)
		return nil
	}
	return n.Decode((*[]string)(l))
}

// StringMap is a map option. The environment and flags give it as one
// string of comma-separated key=value entries; the YAML file as a mapping
// or, the same way, as one string (`topic_configs: cleanup.policy=compact`).
type StringMap map[string]string

// UnmarshalYAML decodes a mapping of strings, or parses a single string
// of key=value entries.
func (m *StringMap) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return n.Decode((*map[string]string)(m))
	}
	parsed, ok := splitMap(n.Value)
	if !ok {
		// A *yaml.TypeError, so the file's error lists it with the others.
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q: %s", n.Line, n.Value, mapSyntax)}}
	}
	*m = parsed
	return nil
}
