package avro

import (
	"fmt"
	"unicode/utf8"

	"github.com/walrelay/walrelay/internal/connect"
)

// This file is Apache Avro's Schema.toString() (apache/avro
// lang/java/avro/src/main/java/org/apache/avro/Schema.java, toJson of each
// schema class; the same in 1.8.2 and 1.12), as Jackson's writer-based
// generator writes it: compact, record keys in the order type, name,
// namespace, fields, properties; field keys name, type, default;
// properties in insertion order.

// writer writes a schema tree; names and space are Schema.Names: the
// records written so far, and the enclosing record's namespace ("" with
// hasSpace false for Java's null).
type writer struct {
	buf      []byte
	names    map[string]*node
	space    string
	hasSpace bool
}

func (w *writer) write(n *node) error {
	switch n.typ {
	case "union":
		// UnionSchema.toJson: the branches in an array, no properties.
		w.buf = append(w.buf, '[')
		for i, b := range n.branches {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			if err := w.write(b); err != nil {
				return err
			}
		}
		w.buf = append(w.buf, ']')
	case "array":
		w.buf = append(w.buf, `{"type":"array","items":`...)
		if err := w.write(n.items); err != nil {
			return err
		}
		w.writeProps(n)
		w.buf = append(w.buf, '}')
	case "record":
		return w.writeRecord(n)
	default:
		// Schema.toJson of a primitive: its name, or an object when it
		// has properties.
		if len(n.props) == 0 {
			w.buf = append(append(append(w.buf, '"'), n.typ...), '"')
			return nil
		}
		w.buf = append(append(append(w.buf, `{"type":"`...), n.typ...), '"')
		w.writeProps(n)
		w.buf = append(w.buf, '}')
	}
	return nil
}

// writeRecord is RecordSchema.toJson with writeNameRef and Name.writeName
// (Schema.java 765-773 at HEAD, 509-517 in 1.8.2): a record already
// written is written again as its name, qualified unless it is in the
// enclosing namespace; "namespace" is written only when it differs from
// the enclosing one, and as "" for no namespace inside one.
func (w *writer) writeRecord(n *node) error {
	full := n.fullName()
	if prev, ok := w.names[full]; ok {
		if prev != n && !equalNodes(prev, n) {
			return fmt.Errorf("%w: Can't redefine: %s", ErrInvalidName, full)
		}
		name := full
		if n.space == "" || w.hasSpace && n.space == w.space {
			name = n.name
		}
		w.buf = appendJSONString(w.buf, name)
		return nil
	}
	w.names[full] = n
	w.buf = append(w.buf, `{"type":"record","name":`...)
	w.buf = appendJSONString(w.buf, n.name)
	if n.space != "" {
		if !w.hasSpace || n.space != w.space {
			w.buf = append(w.buf, `,"namespace":`...)
			w.buf = appendJSONString(w.buf, n.space)
		}
	} else if w.hasSpace {
		w.buf = append(w.buf, `,"namespace":""`...)
	}
	saved, savedHas := w.space, w.hasSpace
	w.space, w.hasSpace = n.space, n.space != ""
	w.buf = append(w.buf, `,"fields":[`...)
	for i, f := range n.fields {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		w.buf = append(w.buf, `{"name":`...)
		w.buf = appendJSONString(w.buf, f.name)
		w.buf = append(w.buf, `,"type":`...)
		if err := w.write(f.typ); err != nil {
			return err
		}
		if f.def != nil {
			w.buf = append(append(w.buf, `,"default":`...), f.def...)
		}
		w.buf = append(w.buf, '}')
	}
	w.buf = append(w.buf, ']')
	w.writeProps(n)
	w.buf = append(w.buf, '}')
	w.space, w.hasSpace = saved, savedHas
	return nil
}

func (w *writer) writeProps(n *node) {
	for _, p := range n.props {
		w.buf = append(w.buf, ',')
		w.buf = appendJSONString(w.buf, p.key)
		w.buf = append(w.buf, ':')
		w.buf = append(w.buf, p.val...)
	}
}

// equalNodes is Schema.equals for the kinds here: type, names, fields with
// their defaults, items, branches and properties.
func equalNodes(a, b *node) bool {
	if a == b {
		return true
	}
	if a.typ != b.typ || a.name != b.name || a.space != b.space || len(a.props) != len(b.props) ||
		len(a.fields) != len(b.fields) || len(a.branches) != len(b.branches) || (a.items == nil) != (b.items == nil) {
		return false
	}
	for _, p := range a.props {
		found := false
		for _, q := range b.props {
			if p.key == q.key && string(p.val) == string(q.val) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	for i := range a.fields {
		f, g := a.fields[i], b.fields[i]
		if f.name != g.name || string(f.def) != string(g.def) || !equalNodes(f.typ, g.typ) {
			return false
		}
	}
	for i := range a.branches {
		if !equalNodes(a.branches[i], b.branches[i]) {
			return false
		}
	}
	return a.items == nil || equalNodes(a.items, b.items)
}

// appendJSONString appends s as a JSON string the way Jackson's
// writer-based generator (Schema.toString writes to a StringWriter) does:
// '"', '\\' and control characters escaped, \b \t \n \f \r in short form,
// the others as \u00XX with upper-case hex; everything else as is,
// characters beyond U+FFFF included (unlike internal/connect's
// AppendJSONString, which is Jackson's UTF-8 generator). Invalid UTF-8 is
// written as U+FFFD, as a Java String would hold it.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, "\uFFFD"...)
				i++
				start = i
				continue
			}
			i += n
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = connect.AppendJSONEscape(append(dst, s[start:i]...), c)
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
