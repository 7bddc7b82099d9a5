package connect

import (
	"errors"
	"fmt"
	"strings"
)

// This file is Debezium's outbox table.expand.json.payload: debezium-
// connect-plugins/src/main/java/io/debezium/transforms/outbox/
// JsonSchemaData.java (toConnectSchema, toConnectData) as
// EventRouterDelegate.java calls it, with field.name.adjustment.mode=none
// (the default).

// ErrNotExpanded is returned by ExpandJSON when Debezium keeps the payload
// as the string it was (it logs "JSON expansion failed"): the text does
// not start with '{' or '[', is not JSON, or its schema cannot be
// inferred (a mixed-type array, for one).
var ErrNotExpanded = errors.New("debezium leaves the payload unexpanded")

// ExpandOptions are the outbox router's JSON expansion options.
type ExpandOptions struct {
	// NullAsOptionalBytes is table.json.payload.null.behavior=
	// optional_bytes: a JSON null becomes an optional BYTES field instead
	// of being left out of the schema (ignore, the default).
	NullAsOptionalBytes bool
	// EmptyArrayAsOptionalString is table.json.payload.empty.array.
	// behavior=optional_string: an empty array becomes an array of
	// optional strings instead of being left out (ignore, the default).
	EmptyArrayAsOptionalString bool
}

// ExpandJSON returns the schema and value Debezium's outbox router makes
// of a JSON payload column's text with table.expand.json.payload=true;
// name is the payload field's name (table.field.event.payload, "payload"
// by default), which names the top-level struct, nested ones being
// "name.field". Objects become optional structs with a field per key in
// the text's order, leaving out nulls and empty arrays unless opts say
// otherwise; strings and booleans optional STRING and BOOLEAN; numbers
// INT32 or INT64 when they are integers that fit, else FLOAT64; arrays
// optional arrays of the first non-null element's schema, or, for arrays
// of objects, of the objects' schemas merged.
//
// Errors: ErrNotExpanded where Debezium keeps the string; ErrData where
// Debezium has inferred the schema but cannot build the value (an integer
// beyond 64 bits, a number type differing between objects of one array, a
// top-level array): Debezium then fails the record, since the inferred
// schema no longer fits the string it kept; ErrUnreproducible where the
// merged schema of an array's objects depends on the order of a Java
// HashSet, which varies between JVM runs; ErrUnsupported for an empty
// top-level array or object list Debezium infers no schema for.
func ExpandJSON(name, text string, opts ExpandOptions) (*Schema, *Struct, error) {
	if !strings.HasPrefix(text, "{") && !strings.HasPrefix(text, "[") {
		return nil, nil, fmt.Errorf("%w: it does not start with '{' or '['", ErrNotExpanded)
	}
	doc, err := parseJSON(text)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrNotExpanded, err)
	}
	x := expander{opts}
	schema, err := x.schemaOf(name, doc)
	if err != nil {
		return nil, nil, err
	}
	if schema == nil {
		return nil, nil, errorfUnsupported("JSON %s gives no schema", text)
	}
	if schema.Type != TypeStruct {
		return nil, nil, dataErrorf("Not a struct schema: %v", schema)
	}
	value, err := x.structOf(doc, schema)
	if err != nil {
		return nil, nil, err
	}
	return schema, value, nil
}

type expander struct{ opts ExpandOptions }

// notExpanded returns an ErrNotExpanded error with Debezium's message.
func notExpanded(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotExpanded, fmt.Sprintf(format, args...))
}

// The optional primitive schemas of Connect's Schema interface.
func optionalOf(t Type) *Schema { return &Schema{Type: t, Optional: true} }

// schemaOf is JsonSchemaData.toConnectSchema; nil where it returns null.
func (x expander) schemaOf(key string, n *jsonNode) (*Schema, error) {
	switch n.kind {
	case nodeString:
		return optionalOf(TypeString), nil
	case nodeBool:
		return optionalOf(TypeBoolean), nil
	case nodeInt:
		return optionalOf(TypeInt32), nil
	case nodeLong:
		return optionalOf(TypeInt64), nil
	case nodeDouble, nodeBigInt:
		return optionalOf(TypeFloat64), nil
	case nodeArray:
		if len(n.items) == 0 {
			if x.opts.EmptyArrayAsOptionalString {
				return &Schema{Type: TypeArray, Optional: true, Items: optionalOf(TypeString)}, nil
			}
			return nil, nil
		}
		items, err := x.arrayItems(key, n)
		if err != nil {
			return nil, err
		}
		return &Schema{Type: TypeArray, Optional: true, Items: items}, nil
	case nodeObject:
		s := &Schema{Type: TypeStruct, Name: key, Optional: true}
		for _, m := range n.members {
			fieldKey := m.key
			if !isBlank(key) {
				fieldKey = key + "." + m.key
			}
			fs, err := x.schemaOf(fieldKey, m.value)
			if err != nil {
				return nil, err
			}
			if fs == nil || s.fieldIndex(m.key) >= 0 {
				continue
			}
			if m.key == "" {
				// SchemaBuilder.field refuses an empty name.
				return nil, notExpanded("fieldName cannot be null.")
			}
			s.Fields = append(s.Fields, Field{m.key, fs})
		}
		return s, nil
	case nodeNull:
		if x.opts.NullAsOptionalBytes {
			return optionalOf(TypeBytes), nil
		}
	}
	return nil, nil
}

// isBlank is Debezium's Strings.isNullOrBlank: empty after Java's trim,
// which drops characters up to U+0020.
func isBlank(s string) bool {
	return strings.TrimLeft(s, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f ") == ""
}

// arrayItems is toConnectSchemaWithCycles: the schema of a non-empty
// array's elements.
func (x expander) arrayItems(key string, arr *jsonNode) (*Schema, error) {
	sample, err := x.firstElement(arr)
	if err != nil {
		return nil, err
	}
	if sample.kind != nodeObject {
		s, err := x.schemaOf("", sample)
		if err != nil {
			return nil, err
		}
		if s == nil {
			return nil, notExpanded("Array '%s' has unrecognized member schema.", arr.asText())
		}
		return s, nil
	}
	// Debezium collects the objects' distinct schemas in a HashSet and
	// merges them in its iteration order.
	var distinct []*Schema
	for _, e := range arr.items {
		if e.kind != nodeObject {
			continue
		}
		s, err := x.schemaOf(key, e)
		if err != nil {
			return nil, err
		}
		dup := false
		for _, d := range distinct {
			if d.Equal(s) {
				dup = true
				break
			}
		}
		if !dup {
			distinct = append(distinct, s)
		}
	}
	if len(distinct) == 1 {
		return distinct[0], nil
	}
	if err := mergeIsOrderFree(distinct); err != nil {
		return nil, err
	}
	merged := distinct[0]
	for _, s := range distinct[1:] {
		merged = mergeSchemas(merged, s)
	}
	return merged, nil
}

// firstElement is getFirstArrayElement: the first non-null element, after
// checking that every non-null element has its node type and, for
// numbers, its schema. A null node when all are null.
func (x expander) firstElement(arr *jsonNode) (*jsonNode, error) {
	ref := &jsonNode{kind: nodeNull}
	var refSchema *Schema
	for _, e := range arr.items {
		if e.kind == nodeNull {
			continue
		}
		if ref.kind == nodeNull {
			ref = e
		}
		if !sameNodeType(e, ref) {
			return nil, notExpanded("Field is not a homogenous array (%s x %s).", ref.asText(), e.nodeTypeName())
		}
		if ref.isNumber() {
			if refSchema == nil {
				refSchema, _ = x.schemaOf("", ref)
			}
			// Debezium compares Connect's shared schema constants by identity.
			if es, _ := x.schemaOf("", e); es.Type != refSchema.Type {
				return nil, notExpanded("Field is not a homogenous array (%s x %s), different number types (%v x %v)",
					ref.asText(), e.asText(), refSchema, es)
			}
		}
	}
	return ref, nil
}

// mergeSchemas is JsonSchemaData.mergeSchema of two struct schemas: left's
// fields, then right's new ones; a BYTES field (a null) gives way to a
// later non-BYTES one. SchemaUtil.copySchemaBasics copies the name but not
// optional: the merged schema is required.
func mergeSchemas(left, right *Schema) *Schema {
	fields := append([]Field(nil), left.Fields...)
	for _, f := range right.Fields {
		i := -1
		for j := range fields {
			if fields[j].Name == f.Name {
				i = j
				break
			}
		}
		switch {
		case i < 0:
			fields = append(fields, f)
		case !fields[i].Schema.Equal(f.Schema) && fields[i].Schema.Type == TypeBytes && f.Schema.Type != TypeBytes:
			fields[i] = f
		}
	}
	return &Schema{Type: left.Type, Name: left.Name, Version: left.Version, HasVersion: left.HasVersion,
		Doc: left.Doc, Params: left.Params, Fields: fields}
}

// mergeIsOrderFree returns ErrUnreproducible unless merging the schemas
// gives the same result in every order, which holds exactly when their
// field name lists are prefixes of one another and each field has at most
// one schema besides BYTES.
func mergeIsOrderFree(schemas []*Schema) error {
	longest := schemas[0]
	for _, s := range schemas[1:] {
		if len(s.Fields) > len(longest.Fields) {
			longest = s
		}
	}
	for _, s := range schemas {
		for i, f := range s.Fields {
			if longest.Fields[i].Name != f.Name {
				return fmt.Errorf("%w: the field order of the merged schema of %q's objects depends on a java.util.HashSet's order", ErrUnreproducible, longest.Name)
			}
		}
	}
	for _, f := range longest.Fields {
		var seen *Schema
		for _, s := range schemas {
			g := s.Field(f.Name)
			if g == nil || g.Schema.Type == TypeBytes {
				continue
			}
			if seen != nil && !seen.Equal(g.Schema) {
				return fmt.Errorf("%w: field %q of %q's objects has several schemas; which wins depends on a java.util.HashSet's order", ErrUnreproducible, f.Name, longest.Name)
			}
			seen = g.Schema
		}
	}
	return nil
}

// structOf is jsonNodeToStructInternal: a struct of schema s with the
// fields the object has, each checked by Struct.put.
func (x expander) structOf(n *jsonNode, s *Schema) (*Struct, error) {
	st, err := NewStruct(s)
	if err != nil {
		return nil, err
	}
	for _, f := range s.Fields {
		m := n.member(f.Name)
		if m == nil {
			continue
		}
		v, err := x.valueOf(m, f.Schema)
		if err != nil {
			return nil, err
		}
		if err := st.Put(f.Name, v); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// valueOf is getStructFieldValue.
func (x expander) valueOf(n *jsonNode, s *Schema) (any, error) {
	switch n.kind {
	case nodeString:
		return n.s, nil
	case nodeBool:
		return n.b, nil
	case nodeDouble:
		return n.f, nil
	case nodeInt:
		return int32(n.i), nil
	case nodeLong:
		return n.i, nil
	case nodeBigInt:
		// node.decimalValue(): a BigDecimal, which no schema here accepts.
		return nil, dataErrorf("Invalid Java object for schema with type %s: class java.math.BigDecimal for the integer %s", s.Type, n.s)
	case nodeArray:
		if s.Type != TypeArray {
			return nil, dataErrorf("Cannot look up value schema on non-array and non-map type")
		}
		out := make([]any, 0, len(n.items))
		for _, e := range n.items {
			v, err := x.valueOf(e, s.Items)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case nodeObject:
		if s.Type != TypeStruct {
			return nil, dataErrorf("Cannot list fields on non-struct type")
		}
		return x.structOf(n, s)
	}
	return nil, nil
}
