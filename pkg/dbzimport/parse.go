package dbzimport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrBadInput is returned (wrapped) when the input is not a Debezium
// Postgres connector's configuration: unparsable JSON or properties, no
// connector.class, or another connector's class.
var ErrBadInput = errors.New("not a Debezium Postgres connector configuration")

// Connector is a Kafka Connect connector's configuration as Connect's REST
// API or a .properties file gives it.
type Connector struct {
	// Name is the connector's name: the wrapper's "name", else the
	// config's own name option; empty when neither is given.
	Name string
	// Config holds the options, every value as text (Connect's REST API
	// takes a map of strings: numbers and booleans are their text).
	Config map[string]string
}

// Parse reads a connector configuration: JSON (the REST body, with or
// without the {"name":…,"config":…} wrapper) when its first non-blank
// character is "{", Java properties otherwise. Errors wrap ErrBadInput.
func Parse(data []byte) (Connector, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n\ufeff") // blanks and a byte order mark
	var (
		c   Connector
		err error
	)
	if bytes.HasPrefix(trimmed, []byte("{")) {
		c, err = parseJSON(trimmed)
	} else {
		c.Config, err = parseProperties(string(trimmed))
	}
	if err != nil {
		return Connector{}, fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	if c.Name == "" {
		c.Name = c.Config["name"]
	}
	return c, nil
}

// parseJSON reads the REST API's connector body: {"name": N, "config":
// {...}} (also as GET /connectors/N returns it, with tasks and type) or
// the config object alone (PUT /connectors/N/config).
func parseJSON(data []byte) (Connector, error) {
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&top); err != nil {
		return Connector{}, fmt.Errorf("parsing JSON: %w", err)
	}
	if dec.More() {
		return Connector{}, errors.New("parsing JSON: text after the top-level object")
	}
	body := top
	var c Connector
	if raw, ok := top["config"]; ok && bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		if name, ok := top["name"]; ok {
			if err := json.Unmarshal(name, &c.Name); err != nil {
				return Connector{}, fmt.Errorf("parsing JSON: \"name\" is not a string")
			}
		}
		body = nil
		if err := json.Unmarshal(raw, &body); err != nil {
			return Connector{}, fmt.Errorf("parsing JSON \"config\": %w", err)
		}
	}
	c.Config = make(map[string]string, len(body))
	for k, raw := range body {
		v, err := jsonText(raw)
		if err != nil {
			return Connector{}, fmt.Errorf("parsing JSON: option %q: %w", k, err)
		}
		c.Config[k] = v
	}
	if c.Name != "" && c.Config["name"] != "" && c.Config["name"] != c.Name {
		return Connector{}, fmt.Errorf("the wrapper names the connector %q and its config %q (Kafka Connect refuses this)", c.Name, c.Config["name"])
	}
	return c, nil
}

// jsonText returns a config value's text as Connect's REST API reads it
// into a String: a string as it is, a number or boolean as written.
func jsonText(raw json.RawMessage) (string, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool:
		return strconv.FormatBool(v), nil
	default:
		return "", fmt.Errorf("want a string, number or boolean, got %s", bytes.TrimSpace(raw))
	}
}

// parseProperties reads Java properties text as java.util.Properties.load
// does: # and ! comments, key and value separated by = or : or blanks,
// backslash line continuations and escapes (\t \n \r \f \uXXXX, any
// other escaped character stands for itself).
func parseProperties(text string) (map[string]string, error) {
	out := map[string]string{}
	lines := strings.Split(strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		// A line ending in an odd number of backslashes continues on the
		// next, whose leading blanks are dropped.
		for endsInEscape(line) && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + strings.TrimLeft(lines[i], " \t\f")
		}
		if endsInEscape(line) { // continued past the end of the text
			line = line[:len(line)-1]
		}
		keyEnd, valStart := splitProperty(line)
		key, err := unescapeProperty(line[:keyEnd])
		if err != nil {
			return nil, fmt.Errorf("properties line %d: %w", lineNo, err)
		}
		val, err := unescapeProperty(line[valStart:])
		if err != nil {
			return nil, fmt.Errorf("properties line %d: %w", lineNo, err)
		}
		out[key] = val
	}
	return out, nil
}

func endsInEscape(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitProperty finds the end of the key (the first unescaped =, : or
// blank) and the start of the value (after blanks, one = or :, blanks).
func splitProperty(line string) (keyEnd, valStart int) {
	keyEnd = len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			keyEnd = i
			break
		}
	}
	i := keyEnd
	for i < len(line) && (line[i] == ' ' || line[i] == '\t' || line[i] == '\f') {
		i++
	}
	if i < len(line) && (line[i] == '=' || line[i] == ':') {
		i++
	}
	for i < len(line) && (line[i] == ' ' || line[i] == '\t' || line[i] == '\f') {
		i++
	}
	return keyEnd, i
}

func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		i++
		if i == len(s) {
			break
		}
		switch c := s[i]; c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", errors.New(`malformed \uXXXX escape`)
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", errors.New(`malformed \uXXXX escape`)
			}
			b.WriteRune(rune(n))
			i += 4
		default:
			_, size := utf8.DecodeRuneInString(s[i:])
			b.WriteString(s[i : i+size])
			i += size - 1
		}
	}
	return b.String(), nil
}
