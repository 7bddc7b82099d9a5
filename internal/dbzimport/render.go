package dbzimport

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/walrelay/walrelay/internal/config"
)

// sections is the order of the YAML's top-level keys.
var sections = []string{"postgres", "kafka", "converter", "router", "relay"}

// result renders the settings as YAML, checks that walrelay's config
// loader accepts them, and sorts the findings.
func (im *importer) result() (Result, error) {
	out, err := im.render()
	if err != nil {
		return Result{}, err
	}
	if err := validate(out, im.dsnNoFiles); err != nil {
		// Every value was checked as it was mapped: this is a bug here.
		return Result{}, fmt.Errorf("the imported configuration does not validate (a bug in walrelay debezium import): %w", err)
	}
	slices.SortStableFunc(im.findings, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Option, b.Option))
	})
	return Result{YAML: out, Findings: im.findings}, nil
}

// render builds the YAML document with its comments.
func (im *importer) render() ([]byte, error) {
	root := &yaml.Node{Kind: yaml.MappingNode}
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}
	doc.HeadComment = comment(strings.Join(im.header, "\n\n"))
	for _, sec := range sections {
		var body *yaml.Node
		for _, s := range im.settings {
			name, ok := strings.CutPrefix(s.path, sec+".")
			if !ok {
				continue
			}
			if body == nil {
				body = &yaml.Node{Kind: yaml.MappingNode}
				root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: sec}, body)
			}
			key := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: name, HeadComment: comment(s.comment)}
			val, err := valueNode(s.value)
			if err != nil {
				return nil, fmt.Errorf("rendering %s: %w", s.path, err)
			}
			body.Content = append(body.Content, key, val)
		}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("rendering YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("rendering YAML: %w", err)
	}
	return b.Bytes(), nil
}

func valueNode(v any) (*yaml.Node, error) {
	switch v := v.(type) {
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}, nil
	case int64:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(v, 10)}, nil
	case []string:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for _, e := range v {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: e})
		}
		return n, nil
	case map[string]string:
		n := &yaml.Node{Kind: yaml.MappingNode}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v[k]})
		}
		return n, nil
	}
	return nil, fmt.Errorf("unexpected value %T", v)
}

// comment wraps text into "# " lines of at most 100 characters; blank
// lines in text separate paragraphs.
func comment(text string) string {
	if text == "" {
		return ""
	}
	var lines []string
	for i, para := range strings.Split(text, "\n\n") {
		if i > 0 {
			lines = append(lines, "#")
		}
		line := "#"
		for _, w := range strings.Fields(para) {
			if len(line)+1+len(w) > 100 && line != "#" {
				lines = append(lines, line)
				line = "#"
			}
			line += " " + w
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// validate loads out as `walrelay config --config` would (over the
// defaults, unknown keys refused) and validates it. The DSN is replaced by
// dsnNoFiles: the TLS files it names are on the machine walrelay will run
// on, not necessarily on this one. For the same reason the registry's PEM
// files are left out, and the registry secrets the YAML leaves to the
// environment are given placeholders, as the variables will give them.
func validate(out []byte, dsnNoFiles string) error {
	c := config.Default()
	dec := yaml.NewDecoder(bytes.NewReader(out))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return err
	}
	c.Postgres.DSN = dsnNoFiles
	conv := &c.Converter
	for _, side := range []struct {
		caFile, caType, certFile, certType, userInfo, token *string
		basic, bearer                                       string
	}{
		{&conv.KeyRegistryCAFile, &conv.KeyRegistryCAType, &conv.KeyRegistryCertFile, &conv.KeyRegistryCertType,
			&conv.KeyBasicAuthUserInfo, &conv.KeyBearerAuthToken, conv.KeyBasicAuthSource, conv.KeyBearerAuthSource},
		{&conv.ValueRegistryCAFile, &conv.ValueRegistryCAType, &conv.ValueRegistryCertFile, &conv.ValueRegistryCertType,
			&conv.ValueBasicAuthUserInfo, &conv.ValueBearerAuthToken, conv.ValueBasicAuthSource, conv.ValueBearerAuthSource},
	} {
		*side.caFile, *side.caType, *side.certFile, *side.certType = "", "", "", ""
		if side.basic == "USER_INFO" && *side.userInfo == "" {
			*side.userInfo = "user:password"
		}
		if side.bearer == "STATIC_TOKEN" && *side.token == "" {
			*side.token = "token"
		}
	}
	return c.Validate()
}
