package connect

import (
	"errors"
	"fmt"
)

// Errors returned by this package. Test them with errors.Is; the message
// after the sentinel's text is Kafka Connect's or Debezium's own where
// they have one.
var (
	// ErrData is returned where Kafka Connect throws a DataException (or
	// Debezium a ConnectException): the value does not fit its schema, or
	// the converter does not accept it. Connect would fail the record.
	ErrData = errors.New("kafka connect refuses the data")

	// ErrUnreproducible is returned where Connect's output depends on the
	// JVM rather than on the data: a byte[] printed by toString is
	// "[B@" and an identity hash; a java.util.HashMap's order. walrelay
	// cannot write the same bytes.
	ErrUnreproducible = errors.New("kafka connect's output is not reproducible")

	// ErrUnsupported is returned for parts of Connect this package does not
	// implement (the Decimal, Date and Time logical types; Debezium's avro
	// field name adjustment), so that they fail loudly instead of being
	// written differently.
	ErrUnsupported = errors.New("not implemented by walrelay's connect package")
)

// dataErrorf returns an ErrData error with Connect's message.
func dataErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrData, fmt.Sprintf(format, args...))
}

// errorfUnsupported returns an ErrUnsupported error naming what is missing.
func errorfUnsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(format, args...))
}
