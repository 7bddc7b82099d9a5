package router

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrorClass says why a row cannot be published as routed: the router's
// own classes (a *RowError's), and the broker's verdicts on a routed
// record, which the relay assigns (ClassRecordTooLarge,
// ClassTopicRejected, and ClassPayloadInvalid for a partition or timestamp
// Kafka cannot take). Its String form is a stable snake_case name: the
// relay.on_error key of its policy (OnErrorClasses), the class label of
// walrelay's error metrics and the dead letter's walrelay.error.class
// header.
type ErrorClass uint8

// Error classes. The zero value is not a valid class.
const (
	// ClassRoutingValueMissing: the route.by.field column is NULL or empty.
	ClassRoutingValueMissing ErrorClass = iota + 1
	// ClassTopicInvalid: the routed topic name is one Kafka rejects (empty,
	// "." or "..", longer than 249 bytes, or a character outside
	// [a-zA-Z0-9._-]).
	ClassTopicInvalid
	// ClassPayloadInvalid: a value the router must interpret cannot be:
	// malformed bytea hex, an unparsable timestamp or one no Kafka record
	// can carry (before 1970 or after 2262-04-11), a non-integer or negative
	// partition, text that is not valid UTF-8 where the envelope needs a JSON
	// string, or a column sent as unchanged TOAST or in binary format.
	ClassPayloadInvalid
	// ClassColumnMissing: a configured column is absent from the relation
	// (returned by Bind as *MissingColumnError) or from the tuple given to
	// Route, RouteTo or RouteInPlace.
	ClassColumnMissing
	// ClassRecordTooLarge: the broker's verdict on a record alone over
	// kafka.batch_max_bytes or the topic's max.message.bytes (the router
	// never returns it).
	ClassRecordTooLarge
	// ClassTopicRejected: the broker refuses the record's topic (a missing
	// ACL, a policy, a topic that does not exist and cannot be created; the
	// router never returns it).
	ClassTopicRejected
	// ClassSchemaRejected: the schema registry refuses the record's Avro
	// schema (incompatible with the subject's earlier versions, invalid,
	// the subject read-only, or not registered when walrelay may not
	// register it; the router never returns it). A registry that is down
	// is not a row error: the stream waits for it.
	ClassSchemaRejected
)

// OnErrorClasses returns the classes relay.on_error sets a policy for, in
// the order of its options: every class but ClassColumnMissing, which
// stops walrelay at startup.
func OnErrorClasses() []ErrorClass {
	return []ErrorClass{ClassRoutingValueMissing, ClassTopicInvalid, ClassPayloadInvalid, ClassRecordTooLarge, ClassTopicRejected, ClassSchemaRejected}
}

// classNames is indexed by ErrorClass; immutable.
var classNames = [...]string{
	ClassRoutingValueMissing: "routing_value_missing",
	ClassTopicInvalid:        "topic_invalid",
	ClassPayloadInvalid:      "payload_invalid",
	ClassColumnMissing:       "column_missing",
	ClassRecordTooLarge:      "record_too_large",
	ClassTopicRejected:       "topic_rejected",
	ClassSchemaRejected:      "schema_rejected",
}

// String returns the class's stable snake_case name, or "unknown(N)".
func (c ErrorClass) String() string {
	if c > 0 && int(c) < len(classNames) {
		return classNames[c]
	}
	return "unknown(" + strconv.Itoa(int(c)) + ")"
}

// ParseErrorClass returns the class whose String form is name.
func ParseErrorClass(name string) (ErrorClass, error) {
	for i, n := range classNames {
		if n != "" && n == name {
			return ErrorClass(i), nil
		}
	}
	return 0, fmt.Errorf("parsing error class %q: want one of %s", name, strings.Join(classNames[1:], ", "))
}

// ClassOf returns the class of the first *RowError or *MissingColumnError in
// err's chain, and false when there is none.
func ClassOf(err error) (ErrorClass, bool) {
	var re *RowError
	if errors.As(err, &re) {
		return re.Class, true
	}
	var me *MissingColumnError
	if errors.As(err, &me) {
		return ClassColumnMissing, true
	}
	return 0, false
}

// RowError is returned by Plan.Route, RouteTo and RouteInPlace when one row
// cannot become a Message. The relay dead-letters or stops on it according
// to its class; other rows are unaffected.
type RowError struct {
	// Class says what went wrong.
	Class ErrorClass
	// Column is the outbox column at fault ("" when none applies).
	Column string
	// Value is the offending value, cut to at most 64 bytes, "" for NULL.
	// It never holds a payload.
	Value string
	// Err describes the problem.
	Err error
}

// Error implements error.
func (e *RowError) Error() string {
	s := "routing row: " + e.Class.String()
	if e.Column != "" {
		s += ": column " + strconv.Quote(e.Column)
	}
	if e.Value != "" {
		s += " value " + strconv.Quote(e.Value)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error.
func (e *RowError) Unwrap() error { return e.Err }

// MissingColumnError is returned by Router.Bind when the relation lacks a
// column that an option names. walrelay refuses to start with it.
type MissingColumnError struct {
	// Column is the configured column name.
	Column string
	// Option is the Debezium option that names it, e.g. "table.field.event.key".
	Option string
	// Table is the relation as "namespace.name".
	Table string
	// Suggestion is a column of the relation whose name differs only in case,
	// or "".
	Suggestion string
}

// Error implements error.
func (e *MissingColumnError) Error() string {
	s := fmt.Sprintf("binding table %q: column %q named by %s does not exist", e.Table, e.Column, e.Option)
	if e.Suggestion != "" {
		s += fmt.Sprintf(" (did you mean %q?)", e.Suggestion)
	}
	return s
}

// maxErrValue bounds RowError.Value so one bad row cannot flood a log line.
const maxErrValue = 64

// errValue copies b into a string of at most maxErrValue bytes, cut on a rune
// boundary and marked with "…" when shortened.
func errValue(b []byte) string {
	if len(b) <= maxErrValue {
		return string(b)
	}
	n := maxErrValue
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n]) + "…"
}
