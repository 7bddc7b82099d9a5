package avro

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/connect"
)

// TestAvroGoldens compares FromConnectSchema and AppendBinary with the
// golden files in testdata/golden. Those were written by Apache Avro's own
// Java code, not by this package: testdata/gen/AvroGolden.java (run by
// make avro-goldens, with Debian's libavro-java 1.8.2) ports AvroData's
// Connect-to-Avro rules and lets Avro's Schema.toString() write each
// schema and its GenericDatumWriter over a direct BinaryEncoder write each
// body (top-level bytes raw, as Confluent's serializer writes them), from
// the Connect schemas and values of testdata/cases.json. A case marked
// expandedFrom also checks that connect.ExpandJSON infers that very
// schema and value from the JSON text. See testdata/README.md.
func TestAvroGoldens(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenCase
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 20 {
		t.Fatalf("only %d cases in cases.json", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			want := readGolden(t, filepath.Join("testdata", "golden", c.Name+".golden"))
			s, err := c.Schema.connect()
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(); err != nil {
				t.Fatalf("case schema: %v", err)
			}
			v, err := connectValue(s, c.Value)
			if err != nil {
				t.Fatal(err)
			}
			if v == nil {
				v = s.Default // the router reads a NULL payload with Struct.get
			}
			if c.ExpandedFrom != "" {
				es, ev, err := connect.ExpandJSON("payload", c.ExpandedFrom, connect.ExpandOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !es.Equal(s) {
					t.Fatalf("connect.ExpandJSON infers another schema than the case's")
				}
				v = ev
			}
			o := Options{ConnectMetaData: c.Options.MetaData == nil || *c.Options.MetaData, ScrubInvalidNames: c.Options.Scrub}
			as, err := FromConnectSchema(s, o)
			if want["error"] != "" {
				if !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), want["error"]) {
					t.Fatalf("FromConnectSchema error %v, want ErrInvalidName saying %q", err, want["error"])
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if as.String() != want["schema"] {
				t.Errorf("schema\n got %s\nwant %s", as, want["schema"])
			}
			body, err := AppendBinary(nil, s, as, v)
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(body); got != want["body"] {
				t.Errorf("body\n got %s\nwant %s", got, want["body"])
			}
		})
	}
}

// readGolden reads the "key: value" lines of a golden file.
func readGolden(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (make avro-goldens writes it)", err)
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("%s: line %q", path, line)
		}
		m[k] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// goldenCase is one case of testdata/cases.json.
type goldenCase struct {
	Name    string `json:"name"`
	Options struct {
		MetaData *bool `json:"connect.meta.data"`
		Scrub    bool  `json:"scrub.invalid.names"`
	} `json:"options"`
	Schema       caseSchema      `json:"schema"`
	Value        json.RawMessage `json:"value"`
	ExpandedFrom string          `json:"expandedFrom"`
}

// caseSchema is a Connect schema in the JSON form of cases.json: the type
// as JsonConverter names it, and the other attributes of ConnectSchema.
type caseSchema struct {
	Type     string            `json:"type"`
	Optional bool              `json:"optional"`
	Name     string            `json:"name"`
	Version  *int32            `json:"version"`
	Doc      string            `json:"doc"`
	Default  json.RawMessage   `json:"default"`
	Fields   []caseField       `json:"fields"`
	Items    *caseSchema       `json:"items"`
	Params   map[string]string `json:"parameters"`
}

type caseField struct {
	Name   string     `json:"name"`
	Schema caseSchema `json:"schema"`
}

var caseTypes = map[string]connect.Type{
	"boolean": connect.TypeBoolean, "int8": connect.TypeInt8, "int16": connect.TypeInt16, "int32": connect.TypeInt32,
	"int64": connect.TypeInt64, "float": connect.TypeFloat32, "double": connect.TypeFloat64, "bytes": connect.TypeBytes,
	"string": connect.TypeString, "array": connect.TypeArray, "struct": connect.TypeStruct,
}

func (c caseSchema) connect() (*connect.Schema, error) {
	t, ok := caseTypes[c.Type]
	if !ok {
		return nil, fmt.Errorf("type %q", c.Type)
	}
	if len(c.Params) > 0 {
		return nil, errors.New("parameters: give them in order (not supported by the cases)")
	}
	s := &connect.Schema{Type: t, Optional: c.Optional, Name: c.Name, Doc: c.Doc}
	if c.Version != nil {
		s.Version, s.HasVersion = *c.Version, true
	}
	for _, f := range c.Fields {
		fs, err := f.Schema.connect()
		if err != nil {
			return nil, err
		}
		s.Fields = append(s.Fields, connect.Field{Name: f.Name, Schema: fs})
	}
	if c.Items != nil {
		var err error
		if s.Items, err = c.Items.connect(); err != nil {
			return nil, err
		}
	}
	if len(c.Default) > 0 && string(c.Default) != "null" {
		var err error
		if s.Default, err = connectValue(s, c.Default); err != nil {
			return nil, fmt.Errorf("default: %w", err)
		}
	}
	return s, nil
}

// connectValue reads a value of schema s in cases.json's JSON form: bytes
// as hex, a struct as an object whose absent fields are unset.
func connectValue(s *connect.Schema, raw json.RawMessage) (any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var x any
	switch s.Type {
	case connect.TypeStruct:
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		st, err := connect.NewStruct(s)
		if err != nil {
			return nil, err
		}
		for _, f := range s.Fields {
			fv, err := connectValue(f.Schema, m[f.Name])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.Name, err)
			}
			if fv != nil {
				if err := st.Put(f.Name, fv); err != nil {
					return nil, err
				}
			}
		}
		return st, nil
	case connect.TypeArray:
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, err
		}
		out := []any{}
		for _, it := range items {
			v, err := connectValue(s.Items, it)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	num := func() (json.Number, error) {
		n, ok := x.(json.Number)
		if !ok {
			return "", fmt.Errorf("%s wants a number, not %s", s.Type, raw)
		}
		return n, nil
	}
	switch s.Type {
	case connect.TypeString:
		return x, nil
	case connect.TypeBoolean:
		return x, nil
	case connect.TypeBytes:
		return hex.DecodeString(x.(string))
	case connect.TypeInt8, connect.TypeInt16, connect.TypeInt32, connect.TypeInt64:
		n, err := num()
		if err != nil {
			return nil, err
		}
		i, err := n.Int64()
		switch s.Type {
		case connect.TypeInt8:
			return int8(i), err
		case connect.TypeInt16:
			return int16(i), err
		case connect.TypeInt32:
			return int32(i), err
		}
		return i, err
	case connect.TypeFloat32, connect.TypeFloat64:
		n, err := num()
		if err != nil {
			return nil, err
		}
		f, err := n.Float64()
		if s.Type == connect.TypeFloat32 {
			return float32(f), err
		}
		return f, err
	}
	return nil, fmt.Errorf("value of %s", s.Type)
}
