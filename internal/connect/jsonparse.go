package connect

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// This file reads JSON text into a tree as Debezium's outbox router does
// with a default Jackson ObjectMapper.readTree (EventRouterDelegate.
// parseJsonPayload): objects keep their keys' first position and a
// repeated key's last value (ObjectNode's LinkedHashMap); integers become
// int (IntNode) when they fit 32 bits, long (LongNode) when they fit 64,
// else BigInteger; numbers with a fraction or exponent become double
// (DoubleNode, Double.parseDouble); only the first value is read and any
// text after it is ignored (FAIL_ON_TRAILING_TOKENS is off). Jackson's
// strict defaults apply: no comments, no leading zeros, no NaN, no
// unescaped control characters in strings.

// nodeKind is a Jackson JsonNodeType, numbers split as JsonNode.isInt,
// isLong and isDouble split them.
type nodeKind int8

const (
	nodeNull nodeKind = iota
	nodeBool
	nodeInt    // IntNode
	nodeLong   // LongNode
	nodeBigInt // BigIntegerNode
	nodeDouble // DoubleNode
	nodeString
	nodeArray
	nodeObject
)

// jsonNode is one node of the tree.
type jsonNode struct {
	kind    nodeKind
	b       bool
	i       int64
	f       float64
	s       string // string value, or a big integer's digits
	items   []*jsonNode
	members []jsonMember
}

type jsonMember struct {
	key   string
	value *jsonNode
}

// isNumber reports Jackson's JsonNodeType.NUMBER.
func (n *jsonNode) isNumber() bool { return n.kind >= nodeInt && n.kind <= nodeDouble }

// sameNodeType reports whether two nodes have the same JsonNodeType.
func sameNodeType(a, b *jsonNode) bool {
	return a.kind == b.kind || a.isNumber() && b.isNumber()
}

// nodeTypeName is JsonNodeType's name, as Debezium's messages print it.
func (n *jsonNode) nodeTypeName() string {
	switch {
	case n.isNumber():
		return "NUMBER"
	case n.kind == nodeNull:
		return "NULL"
	case n.kind == nodeBool:
		return "BOOLEAN"
	case n.kind == nodeString:
		return "STRING"
	case n.kind == nodeArray:
		return "ARRAY"
	}
	return "OBJECT"
}

// asText is JsonNode.asText(): a container's is empty.
func (n *jsonNode) asText() string {
	switch n.kind {
	case nodeNull:
		return "null"
	case nodeBool:
		return strconv.FormatBool(n.b)
	case nodeInt, nodeLong:
		return strconv.FormatInt(n.i, 10)
	case nodeBigInt, nodeString:
		return n.s
	case nodeDouble:
		return FormatDouble(n.f)
	}
	return ""
}

// member returns the value of key, or nil.
func (n *jsonNode) member(key string) *jsonNode {
	for _, m := range n.members {
		if m.key == key {
			return m.value
		}
	}
	return nil
}

// maxDepth bounds nesting, as Jackson 2.15+ does (StreamReadConstraints).
const maxDepth = 1000

type jsonParser struct {
	s     string
	i     int
	depth int
}

// parseJSON reads the first JSON value of s.
func parseJSON(s string) (*jsonNode, error) {
	if !utf8.ValidString(s) {
		return nil, errors.New("text is not valid UTF-8")
	}
	p := &jsonParser{s: s}
	n, err := p.value()
	if err != nil {
		return nil, fmt.Errorf("parsing JSON at offset %d: %w", p.i, err)
	}
	return n, nil
}

func (p *jsonParser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

func (p *jsonParser) value() (*jsonNode, error) {
	p.skipSpace()
	if p.i >= len(p.s) {
		return nil, errors.New("unexpected end of input")
	}
	switch c := p.s[p.i]; {
	case c == '{' || c == '[':
		if p.depth++; p.depth > maxDepth {
			return nil, errors.New("nesting too deep")
		}
		defer func() { p.depth-- }()
		if c == '{' {
			return p.object()
		}
		return p.array()
	case c == '"':
		s, err := p.str()
		return &jsonNode{kind: nodeString, s: s}, err
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	for _, lit := range []struct {
		text string
		node jsonNode
	}{{"true", jsonNode{kind: nodeBool, b: true}}, {"false", jsonNode{kind: nodeBool}}, {"null", jsonNode{kind: nodeNull}}} {
		if len(p.s)-p.i >= len(lit.text) && p.s[p.i:p.i+len(lit.text)] == lit.text {
			end := p.i + len(lit.text)
			// Jackson reads a token to its end: "nullx" is no null.
			if end < len(p.s) && isIdentChar(p.s[end]) {
				break
			}
			p.i = end
			n := lit.node
			return &n, nil
		}
	}
	return nil, fmt.Errorf("unexpected character %q", p.s[p.i])
}

func isIdentChar(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func (p *jsonParser) object() (*jsonNode, error) {
	p.i++ // {
	n := &jsonNode{kind: nodeObject}
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return n, nil
	}
	for {
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return nil, errors.New("expected a quoted field name")
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, errors.New("expected ':'")
		}
		p.i++
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		replaced := false
		for j := range n.members {
			if n.members[j].key == key {
				n.members[j].value, replaced = v, true
				break
			}
		}
		if !replaced {
			n.members = append(n.members, jsonMember{key, v})
		}
		p.skipSpace()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return n, nil
		}
		return nil, errors.New("expected ',' or '}'")
	}
}

func (p *jsonParser) array() (*jsonNode, error) {
	p.i++ // [
	n := &jsonNode{kind: nodeArray}
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return n, nil
	}
	for {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		n.items = append(n.items, v)
		p.skipSpace()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == ']' {
			p.i++
			return n, nil
		}
		return nil, errors.New("expected ',' or ']'")
	}
}

// str reads a quoted string. A lone UTF-16 surrogate (\uD800 alone) is
// refused: a Java String holds it, a Go string cannot.
func (p *jsonParser) str() (string, error) {
	p.i++ // "
	var out []byte
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), nil
		case c < 0x20:
			return "", errors.New("unescaped control character in string")
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.s) {
			break
		}
		e := p.s[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", errors.New("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				var lo rune
				if r < 0xdc00 && p.i+1 < len(p.s) && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
					p.i += 2
					lo, ok = p.hex4()
					if !ok {
						return "", errors.New("bad \\u escape")
					}
				}
				if r = utf16.DecodeRune(r, lo); r == utf8.RuneError {
					return "", fmt.Errorf("%w: a lone UTF-16 surrogate in a JSON string", ErrUnsupported)
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", fmt.Errorf("unrecognized escape \\%c", e)
		}
	}
	return "", errors.New("unterminated string")
}

func (p *jsonParser) hex4() (rune, bool) {
	if p.i+4 > len(p.s) {
		return 0, false
	}
	v, err := strconv.ParseUint(p.s[p.i:p.i+4], 16, 32)
	if err != nil {
		return 0, false
	}
	p.i += 4
	return rune(v), true
}

// number reads a number as Jackson's parser does: an integer token
// without fraction or exponent becomes int, long or BigInteger; any other
// becomes a double.
func (p *jsonParser) number() (*jsonNode, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	switch n := p.i - digits; {
	case n == 0:
		return nil, errors.New("expected a digit")
	case n > 1 && p.s[digits] == '0':
		return nil, errors.New("leading zeros are not allowed")
	}
	integer := true
	if p.i < len(p.s) && p.s[p.i] == '.' {
		integer = false
		p.i++
		if !p.digits() {
			return nil, errors.New("expected a digit after '.'")
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		integer = false
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if !p.digits() {
			return nil, errors.New("expected a digit in the exponent")
		}
	}
	if p.i < len(p.s) && isIdentChar(p.s[p.i]) {
		return nil, fmt.Errorf("unexpected character %q in a number", p.s[p.i])
	}
	text := p.s[start:p.i]
	if !integer {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) { // out of range: ±Infinity or 0, as Java
			return nil, err
		}
		return &jsonNode{kind: nodeDouble, f: f}, nil
	}
	if v, err := strconv.ParseInt(text, 10, 64); err == nil {
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			return &jsonNode{kind: nodeInt, i: v}, nil
		}
		return &jsonNode{kind: nodeLong, i: v}, nil
	}
	b, _ := new(big.Int).SetString(text, 10)
	return &jsonNode{kind: nodeBigInt, s: b.String()}, nil
}

func (p *jsonParser) digits() bool {
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}
