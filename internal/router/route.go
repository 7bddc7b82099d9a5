package router

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
)

// piece is one byte slice of a message: copied into its buffer, or kept in
// the tuple (RouteInPlace).
type piece struct {
	f    *field
	src  []byte
	null bool
	n    int    // length once decoded
	out  []byte // the copy, in the message buffer, or src itself when kept
	kept bool   // left where it is (RouteInPlace): out is src
}

// Route turns the new tuple of one INSERT (pgoutput text format) into a
// Message. commitTime is the transaction's commit time. The Message holds
// copies: the caller may reuse cols' buffers once Route returns. Errors are
// *RowError.
func (p *Plan) Route(cols []*pglogrepl.TupleDataColumn, commitTime time.Time) (Message, error) {
	var msg Message
	if err := p.RouteTo(&msg, cols, commitTime); err != nil {
		return Message{}, err
	}
	return msg, nil
}

// RouteTo is Route writing into *out, whose Headers slice and Buf it
// reuses: the headers are valid until the next RouteTo with the same out,
// and so are their bytes unless out.Buf was moved away (see Message.Buf).
// On error *out is unspecified.
func (p *Plan) RouteTo(out *Message, cols []*pglogrepl.TupleDataColumn, commitTime time.Time) error {
	return p.routeTo(out, cols, commitTime, false)
}

// RouteInPlace is RouteTo without copying what needs no decoding: the key,
// a raw payload and the header values point into cols' bytes, except those
// of bytea columns, which are decoded into out.Buf. The caller keeps cols'
// bytes unchanged for as long as it uses the message.
func (p *Plan) RouteInPlace(out *Message, cols []*pglogrepl.TupleDataColumn, commitTime time.Time) error {
	return p.routeTo(out, cols, commitTime, true)
}

func (p *Plan) routeTo(out *Message, cols []*pglogrepl.TupleDataColumn, commitTime time.Time, inPlace bool) error {
	if len(cols) < p.need {
		return &RowError{Class: ClassColumnMissing,
			Err: fmt.Errorf("tuple has %d columns, table %q needs at least %d", len(cols), p.table, p.need)}
	}
	*out = Message{Headers: out.Headers[:0], Buf: out.Buf}
	msg := out

	rv, null, err := columnData(cols, &p.route)
	if err != nil {
		return err
	}
	if null || len(rv) == 0 {
		what := "empty"
		if null {
			what = "NULL"
		}
		return &RowError{Class: ClassRoutingValueMissing, Column: p.route.name,
			Err: fmt.Errorf("%s value is %s", optRouteByField, what)}
	}
	if msg.Topic, err = p.topic(rv); err != nil {
		return &RowError{Class: ClassTopicInvalid, Column: p.route.name, Value: errValue(rv), Err: err}
	}

	msg.Timestamp = commitTime
	if p.ts.idx >= 0 {
		d, null, err := columnData(cols, &p.ts)
		if err != nil {
			return err
		}
		if !null {
			if msg.Timestamp, err = parseTimestamp(d); err == nil {
				err = checkRecordTime(msg.Timestamp)
			}
			if err != nil {
				return &RowError{Class: ClassPayloadInvalid, Column: p.ts.name, Value: errValue(d), Err: err}
			}
		}
	}

	if p.part.idx >= 0 {
		d, null, err := columnData(cols, &p.part)
		if err != nil {
			return err
		}
		if !null {
			if msg.Partition, err = parsePartition(d); err != nil {
				return &RowError{Class: ClassPayloadInvalid, Column: p.part.name, Value: errValue(d), Err: err}
			}
			msg.HasPartition = true
		}
	}

	pd, pnull, err := columnData(cols, &p.payload)
	if err != nil {
		return err
	}
	asked := p.r.cfg.TombstoneOnEmptyPayload && (pnull || payloadEmpty(pd, p.payload.kind))
	if pnull {
		if has, empty := p.nullPayloadDefault(); has {
			pnull, asked = false, asked && empty // a converter reads the column's default (Struct.get)
		}
	}
	tombstone := pnull && !p.r.envelope // Debezium forwards a null payload as a null value
	if asked {
		tombstone = true
	}

	// Collect every slice the message returns in the raw format, size them,
	// then copy them all (in place: those that need decoding) into one
	// allocation. What another converter writes is left to convert.
	r := p.r
	rawHeaders := r.headerConverter == nil
	rawKey := p.key.idx >= 0 && r.keyConverter == nil
	rawPayload := !tombstone && !r.envelope && r.valueConverter == nil
	pcs := p.pieces[:0]
	if rawHeaders {
		pcs = append(pcs, piece{f: &p.id})
	}
	if rawKey {
		pcs = append(pcs, piece{f: &p.key})
	}
	if rawPayload {
		pcs = append(pcs, piece{f: &p.payload, src: pd, null: pnull})
	}
	if rawHeaders {
		for i := range p.headers {
			pcs = append(pcs, piece{f: &p.headers[i].field})
		}
	}
	defer clear(pcs) // drop references to the caller's and the message's buffers
	total := 0
	for i := range pcs {
		pc := &pcs[i]
		if pc.f != &p.payload {
			if pc.src, pc.null, err = columnData(cols, pc.f); err != nil {
				return err
			}
		}
		if pc.null {
			continue
		}
		if inPlace && pc.f.kind != kindBytea {
			pc.out, pc.kept = pc.src[:len(pc.src):len(pc.src)], true
			continue
		}
		if pc.n, err = decodedLen(pc.src, pc.f.kind); err != nil {
			return p.valueErr(pc.f, pc.src, err)
		}
		total += pc.n
	}
	buf := msg.Buf
	if cap(buf) < total {
		buf = make([]byte, total)
	}
	buf = buf[:total]
	msg.Buf = buf
	off := 0
	for i := range pcs {
		pc := &pcs[i]
		if pc.null || pc.kept {
			continue
		}
		pc.out = buf[off : off+pc.n : off+pc.n]
		off += pc.n
		if err := decodeInto(pc.out, pc.src, pc.f.kind); err != nil {
			return p.valueErr(pc.f, pc.src, err)
		}
	}

	msg.Headers = msg.Headers[:0]
	if p.trace.idx >= 0 {
		if msg.Headers, err = p.traceHeaders(msg.Headers, cols); err != nil {
			return err
		}
	}
	i := 0
	next := func(raw bool) []byte { // the next piece's bytes, when collected
		if !raw {
			return nil
		}
		i++
		return pcs[i-1].out
	}
	msg.Headers = append(msg.Headers, Header{Key: "id", Value: next(rawHeaders)})
	msg.Key = next(rawKey)
	msg.Value = next(rawPayload)
	for h := range p.headers {
		msg.Headers = append(msg.Headers, Header{Key: p.headers[h].alias, Value: next(rawHeaders)})
	}

	if !tombstone && r.envelope && r.valueConverter == nil {
		if msg.Value, err = p.envelope(cols, pd, pnull); err != nil {
			return err
		}
	}
	if r.keyConverter != nil || r.valueConverter != nil || r.headerConverter != nil {
		if err := p.convert(msg, cols, rv, asked); err != nil {
			return err
		}
	}
	if r.avroRegistry {
		return p.avroRegistryRefs(msg, cols)
	}
	return nil
}

// valueErr builds the RowError for a value that cannot be decoded. A payload
// is never echoed into the error.
func (p *Plan) valueErr(f *field, d []byte, err error) error {
	re := &RowError{Class: ClassPayloadInvalid, Column: f.name, Err: err}
	if f != &p.payload {
		re.Value = errValue(d)
	}
	return re
}

// columnData returns the text of column f, or null. A column sent as
// unchanged TOAST or in binary format is a ClassPayloadInvalid RowError: an
// INSERT in text mode never carries either.
func columnData(cols []*pglogrepl.TupleDataColumn, f *field) ([]byte, bool, error) {
	c := cols[f.idx]
	if c == nil {
		return nil, true, nil
	}
	switch c.DataType {
	case pglogrepl.TupleDataTypeText:
		return c.Data, false, nil
	case pglogrepl.TupleDataTypeNull:
		return nil, true, nil
	case pglogrepl.TupleDataTypeToast:
		return nil, false, &RowError{Class: ClassPayloadInvalid, Column: f.name, Err: errToast}
	case pglogrepl.TupleDataTypeBinary:
		return nil, false, &RowError{Class: ClassPayloadInvalid, Column: f.name, Err: errBinary}
	}
	return nil, false, &RowError{Class: ClassPayloadInvalid, Column: f.name,
		Err: fmt.Errorf("unknown tuple data type %q", c.DataType)}
}

var (
	// errToast is the RowError.Err for a column sent as unchanged TOAST.
	errToast = errors.New("value sent as unchanged TOAST, which an INSERT never carries")
	// errBinary is the RowError.Err for a column sent in binary format.
	errBinary = errors.New("value sent in binary format; walrelay streams text format")
)

// payloadEmpty reports whether a non-NULL payload counts as empty for
// route.tombstone.on.empty.payload: text that Java's String.trim() empties
// (only bytes <= ' '), or a zero-length bytea.
func payloadEmpty(d []byte, k kind) bool {
	if k == kindBytea {
		return len(d) == 2 && d[0] == '\\' && d[1] == 'x'
	}
	for _, c := range d {
		if c > ' ' {
			return false
		}
	}
	return true
}

// traceHeaders appends the traceparent and tracestate headers of the row's
// span context column, as Debezium's ActivateTracingSpan adds them before
// the EventRouter's own headers (see tracing.go). Their values are new
// allocations: tracing is rare and the values are short.
func (p *Plan) traceHeaders(hs []Header, cols []*pglogrepl.TupleDataColumn) ([]Header, error) {
	d, null, err := columnData(cols, &p.trace)
	if err != nil || null {
		return hs, err
	}
	tp, ts := traceContext(d)
	if tp == "" {
		return hs, nil
	}
	hs = append(hs, Header{Key: "traceparent", Value: []byte(tp)})
	if ts != "" {
		hs = append(hs, Header{Key: "tracestate", Value: []byte(ts)})
	}
	return hs, nil
}
