package dbzimport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/walrelay/walrelay/internal/javaprops"
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
		c.Config, err = javaprops.Parse(string(trimmed))
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
