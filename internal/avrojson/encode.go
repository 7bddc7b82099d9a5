package avrojson

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// encoder is the scratch of one AppendJSON call, pooled per Codec. The
// document is checked once with json.Valid; the scanner below then trusts
// its syntax and walks it by byte offsets, without building a tree: a
// record's members are located first (their values' spans), then written in
// the schema's field order.
type encoder struct {
	js      []byte
	spans   []span // a stack: each record, array and map pushes its own
	path    []seg  // where the encoder is, for FieldError.Path
	scratch []byte // unescaped strings
}

// span is a JSON value js[start:end]; start < 0 when absent.
type span struct{ start, end int }

// seg is one step of a path: a field name, an array index, or a map key
// (the JSON string js[index:end], unescaped only for an error's path).
type seg struct {
	name       string
	index, end int
	kind       uint8 // segField, segIndex, segKey
}

const (
	segField = iota
	segIndex
	segKey
)

func (e *encoder) reset() {
	e.js = nil
	e.spans = e.spans[:0]
	e.path = e.path[:0]
	if cap(e.scratch) > 64<<10 {
		e.scratch = nil // do not pin a huge payload's buffer in the pool
	}
}

func (e *encoder) pathString() string {
	var b strings.Builder
	for i, s := range e.path {
		switch s.kind {
		case segField:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.name)
		case segIndex:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		case segKey:
			b.WriteByte('[')
			b.WriteString(strconv.Quote(string(e.stringValue(s.index, s.end))))
			b.WriteByte(']')
		}
	}
	return b.String()
}

// fail returns err as a FieldError at the current path.
func (e *encoder) fail(err error) error {
	return &FieldError{Path: e.pathString(), Err: err}
}

func (e *encoder) failType(n *node, c byte) error {
	return e.fail(fmt.Errorf("%w: want %s, got a JSON %s", ErrType, n.typeName(), jsonKind(c)))
}

func (n *node) typeName() string {
	switch n.kind {
	case kRecord, kEnum, kFixed:
		return n.kind.String() + " " + n.name
	case kUnion:
		names := make([]string, len(n.branches))
		for i, b := range n.branches {
			names[i] = b.typeName()
		}
		return "union [" + strings.Join(names, ", ") + "]"
	}
	return n.kind.String()
}

func jsonKind(c byte) string {
	switch c {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

func (e *encoder) encodeDocument(dst, js []byte, root *node) ([]byte, error) {
	if !json.Valid(js) {
		return dst, &FieldError{Err: ErrInvalidJSON}
	}
	e.js = js
	i := skipWS(js, 0)
	mark := len(dst)
	out, err := e.value(dst, root, i, skipValue(js, i))
	if err != nil || root.kind != kBytes {
		return out, err
	}
	// Confluent's top-level bytes: no length prefix.
	_, n := binary.Uvarint(out[mark:])
	return append(out[:mark], out[mark+n:]...), nil
}

// value appends the Avro binary of the JSON value js[i:j] by n.
func (e *encoder) value(dst []byte, n *node, i, j int) ([]byte, error) {
	js := e.js
	c := js[i]
	if c == 'n' && n.kind != kUnion {
		if n.kind == kNull {
			return dst, nil
		}
		return dst, e.fail(fmt.Errorf("%w: %s", ErrNull, n.typeName()))
	}
	switch n.kind {
	case kNull:
		return dst, e.failType(n, c)
	case kBoolean:
		switch c {
		case 't':
			return append(dst, 1), nil
		case 'f':
			return append(dst, 0), nil
		}
		return dst, e.failType(n, c)
	case kInt, kLong:
		if c == '"' && n.logical != lNone {
			v, err := e.logicalString(n, e.stringValue(i, j))
			if err != nil {
				return dst, e.fail(err)
			}
			return appendLong(dst, v), nil
		}
		if !isNumberStart(c) {
			return dst, e.failType(n, c)
		}
		bits := 64
		if n.kind == kInt {
			bits = 32
		}
		v, integer, inRange := parseInt(js[i:j], bits)
		if !integer {
			return dst, e.fail(fmt.Errorf("%w: want an integer for %s, got a JSON number with a fraction or exponent", ErrType, n.kind))
		}
		if !inRange {
			return dst, e.fail(fmt.Errorf("%w: not an Avro %s", ErrRange, n.kind))
		}
		return appendLong(dst, v), nil
	case kFloat, kDouble:
		bits := 64
		if n.kind == kFloat {
			bits = 32
		}
		var f float64
		switch {
		case isNumberStart(c):
			var err error
			// The string does not outlive the call (the error is dropped)
			// and js is not written meanwhile: no copy of the number.
			if f, err = strconv.ParseFloat(unsafe.String(&js[i], j-i), bits); err != nil {
				return dst, e.fail(fmt.Errorf("%w: not an Avro %s", ErrRange, n.kind))
			}
		case c == '"':
			switch string(e.stringValue(i, j)) {
			case "NaN":
				f = javaNaN
			case "Infinity":
				f = math.Inf(1)
			case "-Infinity":
				f = math.Inf(-1)
			default:
				return dst, e.fail(fmt.Errorf("%w: want %s, got a JSON string other than NaN, Infinity, -Infinity", ErrType, n.kind))
			}
		default:
			return dst, e.failType(n, c)
		}
		if n.kind == kFloat {
			return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(f))), nil
		}
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f)), nil
	case kString:
		if c != '"' {
			return dst, e.failType(n, c)
		}
		s := e.stringValue(i, j)
		if !utf8.Valid(s) {
			return dst, e.fail(fmt.Errorf("%w: string is not valid UTF-8", ErrType))
		}
		dst = appendLong(dst, int64(len(s)))
		return append(dst, s...), nil
	case kBytes, kFixed:
		if n.logical == lDecimal && (c == '"' || isNumberStart(c)) {
			text := js[i:j]
			if c == '"' {
				text = e.stringValue(i, j)
			}
			out, err := appendDecimal(dst, n, string(text))
			if err != nil {
				return dst, e.fail(err)
			}
			return out, nil
		}
		if c != '"' {
			return dst, e.failType(n, c)
		}
		s := e.stringValue(i, j)
		count, ok := codePointCount(s)
		if !ok {
			return dst, e.fail(fmt.Errorf("%w: want %s as a JSON string of code points U+0000..U+00FF", ErrType, n.typeName()))
		}
		if n.kind == kFixed {
			if count != n.size {
				return dst, e.fail(fmt.Errorf("%w: %s takes %d bytes, got %d", ErrType, n.typeName(), n.size, count))
			}
		} else {
			dst = appendLong(dst, int64(count))
		}
		return appendCodePoints(dst, s), nil
	case kEnum:
		if c != '"' {
			return dst, e.failType(n, c)
		}
		idx, ok := n.symbols[string(e.stringValue(i, j))]
		if !ok {
			if n.enumDefault < 0 {
				return dst, e.fail(fmt.Errorf("%w %s", ErrSymbol, n.name))
			}
			idx = n.enumDefault
		}
		return appendLong(dst, int64(idx)), nil
	case kArray:
		if c != '[' {
			return dst, e.failType(n, c)
		}
		return e.array(dst, n, i)
	case kMap:
		if c != '{' {
			return dst, e.failType(n, c)
		}
		return e.mapValue(dst, n, i)
	case kRecord:
		if c != '{' {
			return dst, e.failType(n, c)
		}
		return e.record(dst, n, i)
	case kUnion:
		return e.union(dst, n, i, j)
	}
	return dst, e.fail(fmt.Errorf("%w: unsupported schema kind %s", ErrType, n.kind))
}

func (e *encoder) record(dst []byte, n *node, i int) ([]byte, error) {
	js := e.js
	base := len(e.spans)
	for range n.fields {
		e.spans = append(e.spans, span{start: -1})
	}
	p := skipWS(js, i+1)
	for js[p] != '}' {
		ks, ke := p, skipString(js, p)
		vs := skipWS(js, skipWS(js, ke)+1) // past ':'
		ve := skipValue(js, vs)
		if idx, ok := n.fieldIdx[string(e.stringValue(ks, ke))]; ok {
			e.spans[base+idx] = span{vs, ve} // a repeated member: the last wins
		}
		p = skipWS(js, ve)
		if js[p] == ',' {
			p = skipWS(js, p+1)
		}
	}
	for k := range n.fields {
		f := &n.fields[k]
		sp := e.spans[base+k]
		e.path = append(e.path, seg{kind: segField, name: f.name})
		switch {
		case sp.start >= 0:
			var err error
			if dst, err = e.value(dst, f.node, sp.start, sp.end); err != nil {
				return dst, err
			}
		case f.hasDef:
			dst = append(dst, f.def...)
		default:
			return dst, e.fail(ErrMissingField)
		}
		e.path = e.path[:len(e.path)-1]
	}
	e.spans = e.spans[:base]
	return dst, nil
}

func (e *encoder) array(dst []byte, n *node, i int) ([]byte, error) {
	js := e.js
	base := len(e.spans)
	p := skipWS(js, i+1)
	for js[p] != ']' {
		end := skipValue(js, p)
		e.spans = append(e.spans, span{p, end})
		p = skipWS(js, end)
		if js[p] == ',' {
			p = skipWS(js, p+1)
		}
	}
	if count := len(e.spans) - base; count > 0 {
		dst = appendLong(dst, int64(count))
		for k := range count {
			sp := e.spans[base+k]
			e.path = append(e.path, seg{kind: segIndex, index: k})
			var err error
			if dst, err = e.value(dst, n.items, sp.start, sp.end); err != nil {
				return dst, err
			}
			e.path = e.path[:len(e.path)-1]
		}
	}
	e.spans = e.spans[:base]
	return append(dst, 0), nil
}

func (e *encoder) mapValue(dst []byte, n *node, i int) ([]byte, error) {
	js := e.js
	base := len(e.spans)
	p := skipWS(js, i+1)
	for js[p] != '}' {
		ke := skipString(js, p)
		vs := skipWS(js, skipWS(js, ke)+1)
		ve := skipValue(js, vs)
		e.spans = append(e.spans, span{p, ke}, span{vs, ve})
		p = skipWS(js, ve)
		if js[p] == ',' {
			p = skipWS(js, p+1)
		}
	}
	if count := (len(e.spans) - base) / 2; count > 0 {
		dst = appendLong(dst, int64(count))
		for k := range count {
			ks, vs := e.spans[base+2*k], e.spans[base+2*k+1]
			key := e.stringValue(ks.start, ks.end)
			if !utf8.Valid(key) {
				return dst, e.fail(fmt.Errorf("%w: map key is not valid UTF-8", ErrType))
			}
			dst = appendLong(dst, int64(len(key)))
			dst = append(dst, key...)
			e.path = append(e.path, seg{kind: segKey, index: ks.start, end: ks.end})
			var err error
			if dst, err = e.value(dst, n.values, vs.start, vs.end); err != nil {
				return dst, err
			}
			e.path = e.path[:len(e.path)-1]
		}
	}
	e.spans = e.spans[:base]
	return append(dst, 0), nil
}

func (e *encoder) union(dst []byte, n *node, i, j int) ([]byte, error) {
	js := e.js
	c := js[i]
	if c == 'n' {
		if n.nullIndex < 0 {
			return dst, e.fail(fmt.Errorf("%w: %s", ErrNull, n.typeName()))
		}
		return appendLong(dst, int64(n.nullIndex)), nil
	}
	if c == '{' && n.tagIdx != nil {
		// Avro's tagged JSON form: {"branch": value}, one member.
		ks := skipWS(js, i+1)
		if js[ks] == '"' {
			ke := skipString(js, ks)
			vs := skipWS(js, skipWS(js, ke)+1)
			ve := skipValue(js, vs)
			if bi, ok := n.tagIdx[string(e.stringValue(ks, ke))]; ok && js[skipWS(js, ve)] == '}' {
				return e.value(appendLong(dst, int64(bi)), n.branches[bi], vs, ve)
			}
		}
	}
	// A bare value: the first branch that takes it.
	mark, pathLen, spansLen := len(dst), len(e.path), len(e.spans)
	var firstErr error
	var tried []string
	for bi, b := range n.branches {
		if b.kind == kNull || !takesToken(b, c) {
			continue
		}
		out, err := e.value(appendLong(dst, int64(bi)), b, i, j)
		if err == nil {
			return out, nil
		}
		dst, e.path, e.spans = dst[:mark], e.path[:pathLen], e.spans[:spansLen]
		if firstErr == nil {
			firstErr = err
		}
		tried = append(tried, b.typeName())
	}
	switch len(tried) {
	case 0:
		return dst, e.fail(fmt.Errorf("%w: no branch of %s takes a JSON %s", ErrUnion, n.typeName(), jsonKind(c)))
	case 1:
		return dst, firstErr
	}
	return dst, e.fail(fmt.Errorf("%w: tried %s; the first said: %v", ErrUnion, strings.Join(tried, ", "), firstErr))
}

// takesToken says whether a value of n may start with the JSON byte c.
func takesToken(n *node, c byte) bool {
	switch c {
	case '"':
		switch n.kind {
		case kString, kEnum, kBytes, kFixed, kFloat, kDouble:
			return true
		case kInt, kLong:
			return n.logical != lNone
		}
	case 't', 'f':
		return n.kind == kBoolean
	case '[':
		return n.kind == kArray
	case '{':
		return n.kind == kRecord || n.kind == kMap
	case 'n':
		return n.kind == kNull
	default:
		switch n.kind {
		case kInt, kLong, kFloat, kDouble:
			return true
		case kBytes, kFixed:
			return n.logical == lDecimal
		}
	}
	return false
}

// javaNaN is Java's Double.NaN (0x7ff8000000000000), the NaN Java's Avro
// writes (and, narrowed, Float.NaN 0x7fc00000); Go's math.NaN() has another
// bit pattern.
var javaNaN = math.Float64frombits(0x7ff8000000000000)
