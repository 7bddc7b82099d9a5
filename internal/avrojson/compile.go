package avrojson

import (
	"fmt"
	"strings"

	"github.com/twmb/avro"
)

type kind uint8

const (
	kNull kind = iota
	kBoolean
	kInt
	kLong
	kFloat
	kDouble
	kString
	kBytes
	kFixed
	kEnum
	kArray
	kMap
	kRecord
	kUnion
)

var kindNames = [...]string{"null", "boolean", "int", "long", "float", "double", "string", "bytes", "fixed", "enum", "array", "map", "record", "union"}

func (k kind) String() string { return kindNames[k] }

type logical uint8

const (
	lNone logical = iota
	lDate
	lTimeMillis
	lTimeMicros
	lTimestampMillis
	lTimestampMicros
	lTimestampNanos
	lLocalTimestampMillis
	lLocalTimestampMicros
	lLocalTimestampNanos
	lDecimal
)

// node is a compiled schema node: what the encoder needs, resolved (named
// references point at their definition, so recursive schemas are cycles).
type node struct {
	kind    kind
	logical logical
	name    string // full name of a record, enum or fixed
	short   string // its name without namespace

	size             int // fixed
	precision, scale int // decimal

	symbols     map[string]int // enum
	enumDefault int            // enum: index of the default symbol, -1 without one

	items  *node // array
	values *node // map

	fields   []field        // record, in schema order
	fieldIdx map[string]int // record: field names and aliases → index

	branches  []*node // union
	nullIndex int     // union: index of the null branch, -1 without one
	// tagIdx maps the names a tagged-union member may use to branch indexes;
	// nil when tagged JSON is ambiguous for this union (see the package doc).
	tagIdx map[string]int
}

type field struct {
	name   string
	node   *node
	hasDef bool
	def    []byte // the default's Avro binary
}

// compiler resolves named types of one schema.
type compiler struct {
	defs   map[string]*avro.SchemaNode // full name → definition
	built  map[string]*node
	unions []*node // to finish once every record has its fields
}

func compile(root *avro.SchemaNode) (*node, error) {
	c := &compiler{defs: map[string]*avro.SchemaNode{}, built: map[string]*node{}}
	c.collect(root)
	out, err := c.build(root, "")
	if err != nil {
		return nil, err
	}
	for _, u := range c.unions {
		finishUnion(u)
	}
	return out, nil
}

func fullName(n *avro.SchemaNode) string {
	if strings.Contains(n.Name, ".") || n.Namespace == "" {
		return n.Name
	}
	return n.Namespace + "." + n.Name
}

func namespaceOf(full string) string {
	if i := strings.LastIndexByte(full, '.'); i >= 0 {
		return full[:i]
	}
	return ""
}

// collect records every named type's definition in the tree.
func (c *compiler) collect(n *avro.SchemaNode) {
	switch n.Type {
	case "record", "error", "enum", "fixed":
		full := fullName(n)
		if _, ok := c.defs[full]; ok {
			return
		}
		c.defs[full] = n
		for i := range n.Fields {
			c.collect(&n.Fields[i].Type)
		}
	case "array":
		if n.Items != nil {
			c.collect(n.Items)
		}
	case "map":
		if n.Values != nil {
			c.collect(n.Values)
		}
	case "union":
		for i := range n.Branches {
			c.collect(&n.Branches[i])
		}
	}
}

var primitives = map[string]kind{
	"null": kNull, "boolean": kBoolean, "int": kInt, "long": kLong,
	"float": kFloat, "double": kDouble, "string": kString, "bytes": kBytes,
}

var logicals = map[string]logical{
	"date": lDate, "time-millis": lTimeMillis, "time-micros": lTimeMicros,
	"timestamp-millis": lTimestampMillis, "timestamp-micros": lTimestampMicros, "timestamp-nanos": lTimestampNanos,
	"local-timestamp-millis": lLocalTimestampMillis, "local-timestamp-micros": lLocalTimestampMicros,
	"local-timestamp-nanos": lLocalTimestampNanos, "decimal": lDecimal,
}

// logicalFor keeps a logical type only on the underlying type it annotates
// (specification: an invalid logical type is ignored, the underlying type is
// used).
func logicalFor(k kind, name string) logical {
	l := logicals[name]
	switch l {
	case lDate, lTimeMillis:
		if k == kInt {
			return l
		}
	case lTimeMicros, lTimestampMillis, lTimestampMicros, lTimestampNanos,
		lLocalTimestampMillis, lLocalTimestampMicros, lLocalTimestampNanos:
		if k == kLong {
			return l
		}
	case lDecimal:
		if k == kBytes || k == kFixed {
			return l
		}
	}
	return lNone
}

// build compiles n; ns is the enclosing namespace, for resolving references.
func (c *compiler) build(n *avro.SchemaNode, ns string) (*node, error) {
	if k, ok := primitives[n.Type]; ok {
		out := &node{kind: k, logical: logicalFor(k, n.LogicalType)}
		if out.logical == lDecimal {
			out.precision, out.scale = n.Precision, n.Scale
		}
		return out, nil
	}
	switch n.Type {
	case "record", "error", "enum", "fixed":
		return c.buildNamed(n)
	case "array":
		items, err := c.build(n.Items, ns)
		if err != nil {
			return nil, err
		}
		return &node{kind: kArray, items: items}, nil
	case "map":
		values, err := c.build(n.Values, ns)
		if err != nil {
			return nil, err
		}
		return &node{kind: kMap, values: values}, nil
	case "union":
		return c.buildUnion(n, ns)
	}
	// A reference to a named type: a full name, or a name in the enclosing
	// namespace, else in the null namespace (specification, "Names").
	if !strings.Contains(n.Type, ".") && ns != "" {
		if def, ok := c.defs[ns+"."+n.Type]; ok {
			return c.buildNamed(def)
		}
	}
	if def, ok := c.defs[n.Type]; ok {
		return c.buildNamed(def)
	}
	return nil, fmt.Errorf("unknown type %q (schema references are not supported)", n.Type)
}

func (c *compiler) buildNamed(def *avro.SchemaNode) (*node, error) {
	full := fullName(def)
	if out, ok := c.built[full]; ok {
		return out, nil
	}
	out := &node{name: full, short: full[strings.LastIndexByte(full, '.')+1:]}
	c.built[full] = out // before the fields: a recursive reference finds it
	ns := namespaceOf(full)
	switch def.Type {
	case "enum":
		out.kind = kEnum
		out.symbols = make(map[string]int, len(def.Symbols))
		out.enumDefault = -1
		for i, s := range def.Symbols {
			out.symbols[s] = i
			if def.HasEnumDefault && s == def.EnumDefault {
				out.enumDefault = i
			}
		}
	case "fixed":
		out.kind = kFixed
		out.size = def.Size
		out.logical = logicalFor(kFixed, def.LogicalType)
		if out.logical == lDecimal {
			out.precision, out.scale = def.Precision, def.Scale
		}
	default: // record, error
		out.kind = kRecord
		out.fields = make([]field, len(def.Fields))
		out.fieldIdx = make(map[string]int, len(def.Fields))
		for i := range def.Fields {
			f := &def.Fields[i]
			fn, err := c.build(&f.Type, ns)
			if err != nil {
				return nil, fmt.Errorf("field %s.%s: %w", full, f.Name, err)
			}
			out.fields[i] = field{name: f.Name, node: fn, hasDef: f.HasDefault}
			if f.HasDefault {
				if out.fields[i].def, err = encodeDefault(f); err != nil {
					return nil, fmt.Errorf("field %s.%s: encoding its default: %w", full, f.Name, err)
				}
			}
		}
		// Names first, so that an alias never shadows another field's name.
		for i, f := range def.Fields {
			out.fieldIdx[f.Name] = i
		}
		for i, f := range def.Fields {
			for _, a := range f.Aliases {
				if _, ok := out.fieldIdx[a]; !ok {
					out.fieldIdx[a] = i
				}
			}
		}
	}
	return out, nil
}

// encodeDefault writes a field's default as Avro binary with twmb/avro, from
// the value its parser read (for a union, the first branch's: specification,
// "Complex Types", record field defaults).
func encodeDefault(f *avro.SchemaField) ([]byte, error) {
	s, err := f.Type.Schema()
	if err != nil {
		return nil, err
	}
	return s.AppendEncode(nil, f.Default)
}

func (c *compiler) buildUnion(n *avro.SchemaNode, ns string) (*node, error) {
	out := &node{kind: kUnion, nullIndex: -1, tagIdx: map[string]int{}}
	for i := range n.Branches {
		b, err := c.build(&n.Branches[i], ns)
		if err != nil {
			return nil, err
		}
		out.branches = append(out.branches, b)
		var names []string
		switch b.kind {
		case kNull:
			out.nullIndex = i
			names = []string{"null"}
		case kRecord, kEnum, kFixed:
			names = []string{b.name, b.short}
		default:
			names = []string{b.kind.String()}
		}
		for _, name := range names {
			if _, ok := out.tagIdx[name]; !ok {
				out.tagIdx[name] = i
			}
		}
	}
	c.unions = append(c.unions, out)
	return out, nil
}

// finishUnion drops the tagged-JSON names of a union where a one-member
// object could also be a bare value: with a map branch, or a record branch
// having a field of a branch's name.
func finishUnion(out *node) {
	ambiguous := false
	for _, b := range out.branches {
		if b.kind == kMap {
			ambiguous = true
		}
		if b.kind != kRecord {
			continue
		}
		for name := range out.tagIdx {
			if _, ok := b.fieldIdx[name]; ok {
				ambiguous = true
			}
		}
	}
	if ambiguous {
		out.tagIdx = nil
	}
}
