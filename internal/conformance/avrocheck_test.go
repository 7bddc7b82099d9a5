package conformance

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walrelay/walrelay/internal/testenv"
)

// The avro settings' expected bytes and their independent decoding.
//
// The expected key and value of a record are the model's (avro_test.go):
// Confluent's header with the id the setting's registry holds for the
// model's schema text under the record's subject (TopicNameStrategy:
// <topic>-key, <topic>-value), then the model's body. The id is looked up
// in the registry by subject and schema (POST /subjects/{subject},
// Confluent's lookUpSubjectVersion) and the text the registry stores is
// compared with the model's byte for byte, so a passing record also proves
// that walrelay registered exactly the schema AvroConverter registers.
//
// Then every Avro key and value that landed is decoded by Apache Avro's
// Python library (testenv.DecodeAvroBatch, python3-avro) with the schema the
// registry returns for the id in its header (GET /schemas/ids/{id}), and
// the data is compared with the case's Connect values: data, not names,
// since Python resolves "namespace":"" differently from Java
// (docs/design/avro.md §1.2).

// isAvro reports whether s is one of the AvroConverter settings.
func (s Setting) isAvro() bool { return s == SettingAvro || s == SettingAvroNoMeta }

// avroBytes is what AvroConverter writes for Connect value v of schema s
// on topic, with the id registered at registryURL: nil for a null.
func avroBytes(st Setting, registryURL, topic string, isKey bool, s *Schema, v any) ([]byte, error) {
	if v == nil {
		return nil, nil // the Serializer returns null before any registry call
	}
	n := avroSchemaOf(s, st == SettingAvro)
	text := avroText(n)
	body, _ := avroBody(n, s, v)
	subject := topic + "-value"
	if isKey {
		subject = topic + "-key"
	}
	id, err := registryLookup(registryURL, subject, text)
	if err != nil {
		return nil, err
	}
	return confluentWire(id, body), nil
}

// registryLookup returns the id the registry holds text under subject by,
// checking that the text it stores is text byte for byte.
func registryLookup(registryURL, subject, text string) (int32, error) {
	req, _ := json.Marshal(map[string]string{"schema": text})
	var found struct {
		ID     int32  `json:"id"`
		Schema string `json:"schema"`
	}
	status, err := registryCall(http.MethodPost, registryURL+"/subjects/"+url.PathEscape(subject), req, &found)
	if err != nil {
		return 0, err
	}
	if status == http.StatusNotFound {
		var latest struct {
			Schema string `json:"schema"`
		}
		if st, err := registryCall(http.MethodGet, registryURL+"/subjects/"+url.PathEscape(subject)+"/versions/latest", nil, &latest); err == nil && st == http.StatusOK {
			return 0, fmt.Errorf("subject %s holds no schema equal to AvroData's; its latest:\n    got  %s\n    want %s", subject, latest.Schema, text)
		}
		return 0, fmt.Errorf("subject %s does not exist or holds no schema equal to AvroData's %s", subject, text)
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("looking up %s under %s: HTTP %d", text, subject, status)
	}
	if found.Schema != text {
		return 0, fmt.Errorf("subject %s holds id %d with a text that differs from AvroData's:\n    got  %s\n    want %s", subject, found.ID, found.Schema, text)
	}
	return found.ID, nil
}

// registrySchemaByID is GET /schemas/ids/{id}: the text a consumer's
// deserializer reads.
func registrySchemaByID(registryURL string, id int32) (string, error) {
	var got struct {
		Schema string `json:"schema"`
	}
	status, err := registryCall(http.MethodGet, registryURL+"/schemas/ids/"+strconv.Itoa(int(id)), nil, &got)
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("GET /schemas/ids/%d: HTTP %d", id, status)
	}
	return got.Schema, nil
}

func registryCall(method, u string, body []byte, out any) (int, error) {
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("asking the registry: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("reading the registry's answer: %w", err)
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, out); err != nil {
			return 0, fmt.Errorf("decoding the registry's answer %s: %w", b, err)
		}
	}
	return resp.StatusCode, nil
}

// avroPlain is a Connect value as testenv.DecodeAvroBatch renders what
// python3-avro decodes: records as maps (a null field takes its schema's
// default, Connect's Struct.get), bytes as lowercase hex, numbers as
// float64 (see canonNumbers).
func avroPlain(s *Schema, v any) any {
	switch v := v.(type) {
	case nil, string, bool:
		return v
	case int8:
		return float64(v)
	case int16:
		return float64(v)
	case int32:
		return float64(v)
	case int64:
		return float64(v)
	case float32:
		return float64(v)
	case float64:
		return v
	case []byte:
		return hex.EncodeToString(v)
	case Struct:
		m := make(map[string]any, len(v.Schema.Fields))
		for _, f := range v.Schema.Fields {
			m[f.Name] = avroPlain(f.Schema, structGet(v, f))
		}
		return m
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = avroPlain(s.Items, e)
		}
		return out
	}
	panic(fmt.Sprintf("avroPlain: %T", v))
}

// canonNumbers turns DecodeAvroBatch's json.Numbers into float64 (every
// number the cases hold is exact in a float64).
func canonNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		f, err := v.Float64()
		if err != nil {
			return v
		}
		return f
	case map[string]any:
		for k, x := range v {
			v[k] = canonNumbers(x)
		}
	case []any:
		for i, x := range v {
			v[i] = canonNumbers(x)
		}
	}
	return v
}

// pythonName is a name segment python3-avro 1.11.1 accepts
// (lang/py/avro/name.py: every dotted segment, ASCII).
var pythonName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// pythonRefuses returns the record names and namespaces of schema text
// python3-avro refuses to parse, though Java's Avro accepts them
// (docs/design/avro.md §0.10).
func pythonRefuses(text string) []string {
	var bad []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range []string{"name", "namespace"} {
				if s, ok := v[k].(string); ok && s != "" && v["type"] == "record" {
					for _, seg := range strings.Split(s, ".") {
						if !pythonName.MatchString(seg) {
							bad = append(bad, s)
							break
						}
					}
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	var v any
	if err := json.Unmarshal([]byte(text), &v); err == nil {
		walk(v)
	}
	return bad
}

// pyavroCheck decodes every Avro key and value of case c that landed in
// run r with python3-avro, using the registry's schema for the id in its
// header, and compares the data with the case's Connect values. want and
// got are compare's pairs, in the same order.
func pyavroCheck(t *testing.T, registryURL string, want []expected, got []*kgo.Record) {
	if len(want) != len(got) {
		t.Skipf("%d records landed, %d expected: compare reports the difference", len(got), len(want))
	}
	var batch pyavroBatch
	for i, g := range got {
		w := want[i].rec
		for _, side := range []struct {
			name   string
			b      []byte
			schema *Schema
			v      any
		}{{"key", g.Key, w.KeySchema, w.Key}, {"value", g.Value, w.ValueSchema, w.Value}} {
			if side.b == nil {
				continue
			}
			if len(side.b) < 5 || side.b[0] != 0 {
				t.Errorf("record %d %s %s: not Confluent's wire format", i, side.name, show(side.b))
				continue
			}
			id := int32(binary.BigEndian.Uint32(side.b[1:5]))
			text, err := registrySchemaByID(registryURL, id)
			if err != nil {
				t.Errorf("record %d %s: %v", i, side.name, err)
				continue
			}
			if bad := pythonRefuses(text); len(bad) > 0 {
				t.Logf("record %d %s: not decoded: python3-avro refuses the names %q (Java's Avro accepts them; docs/design/avro.md §0.10)", i, side.name, bad)
				continue
			}
			batch.add(text, fmt.Sprintf("record %d (%s[%d]@%d) %s", i, g.Topic, g.Partition, g.Offset, side.name),
				side.b[5:], avroPlain(side.schema, side.v))
		}
	}
	batch.check(t, "the registry's schema")
}

// pyavroBatch groups Avro bodies by the schema text they are written
// with, in the order the schemas first come, each with the value
// python3-avro must decode it to: one python process per schema.
type pyavroBatch struct {
	order    []string
	bySchema map[string][]pyavroItem
}

type pyavroItem struct {
	what string // the record, for errors
	body []byte
	want any
}

func (b *pyavroBatch) add(text, what string, body []byte, want any) {
	if b.bySchema == nil {
		b.bySchema = map[string][]pyavroItem{}
	}
	if _, seen := b.bySchema[text]; !seen {
		b.order = append(b.order, text)
	}
	b.bySchema[text] = append(b.bySchema[text], pyavroItem{what, body, want})
}

// check decodes every body with python3-avro (testenv.DecodeAvroBatch) by
// its schema, named in errors as schemaName, and compares with its value.
func (b *pyavroBatch) check(t *testing.T, schemaName string) {
	t.Helper()
	for _, text := range b.order {
		items := b.bySchema[text]
		bodies := make([][]byte, len(items))
		for i, it := range items {
			bodies[i] = it.body
		}
		decoded := testenv.DecodeAvroBatch(t, text, bodies)
		for i, it := range items {
			if d := canonNumbers(decoded[i]); !reflect.DeepEqual(d, it.want) {
				t.Errorf("%s: python3-avro decodes %#v with %s %s\n    want %#v", it.what, d, schemaName, text, it.want)
			}
		}
	}
}

// errNotDeterministic is returned for a setting whose Connect bytes depend
// on object identity and for which the case lists no SettingDiff.
var errNotDeterministic = errors.New("Connect's bytes in this setting are not deterministic but the case lists no SettingDiff for it")
