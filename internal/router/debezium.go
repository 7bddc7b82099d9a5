package router

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/walrelay/walrelay/internal/connect"
)

// This file gives a Postgres column the Connect schema and value Debezium's
// Postgres connector gives it with its default settings
// (PostgresValueConverter.schemaBuilder and converters in
// debezium-connector-postgres/src/main/java/io/debezium/connector/postgresql/PostgresValueConverter.java,
// decimal.handling.mode=precise, time.precision.mode=adaptive,
// binary.handling.mode=bytes), for the converters other than raw.

// More type OIDs (pg_type.dat).
const (
	oidTextT        = 25
	oidBPChar       = 1042
	oidVarcharT     = 1043
	oidName         = 19
	oidDateT        = 1082
	oidTimestampT   = 1114
	oidTimestamptzT = 1184
	oidUUIDT        = 2950
)

// Connect type names (Schema.Type, lower-case as JsonConverter writes them).
const (
	ctBoolean = "boolean"
	ctInt16   = "int16"
	ctInt32   = "int32"
	ctInt64   = "int64"
	ctFloat32 = "float"
	ctFloat64 = "double"
	ctBytes   = "bytes"
	ctString  = "string"
)

// Semantic type names Debezium gives columns (io.debezium.data.*,
// io.debezium.time.*), each at version 1.
const (
	semUUID           = "io.debezium.data.Uuid"
	semJSON           = "io.debezium.data.Json"
	semDate           = "io.debezium.time.Date"
	semTimestamp      = "io.debezium.time.Timestamp"
	semMicroTimestamp = "io.debezium.time.MicroTimestamp"
	semZonedTimestamp = "io.debezium.time.ZonedTimestamp"
)

// colType is the Connect schema Debezium gives a column, less optional
// (the column's nullability).
type colType struct {
	typ     string
	name    string // semantic name; "" for none
	version int    // 1 with a name, 0 without
	prec    int    // timestamps: the column's fractional digits
}

// debeziumType returns the Connect schema Debezium gives a column of type
// oid with modifier mod, or an error for the types walrelay does not
// reproduce (numeric's Decimal, arrays, geometric types, enums, ...), so
// that a converter other than raw never sends bytes Debezium would not.
func debeziumType(oid uint32, mod int32) (colType, error) {
	switch oid {
	case oidBool:
		return colType{typ: ctBoolean}, nil
	case oidInt2:
		return colType{typ: ctInt16}, nil
	case oidInt4:
		return colType{typ: ctInt32}, nil
	case oidInt8:
		return colType{typ: ctInt64}, nil
	case oidFloat4:
		return colType{typ: ctFloat32}, nil
	case oidFloat8:
		return colType{typ: ctFloat64}, nil
	case oidTextT, oidVarcharT, oidBPChar, oidName:
		return colType{typ: ctString}, nil
	case oidBytea:
		return colType{typ: ctBytes}, nil
	case oidUUIDT:
		return colType{typ: ctString, name: semUUID, version: 1}, nil
	case oidJSON, oidJSONB:
		return colType{typ: ctString, name: semJSON, version: 1}, nil
	case oidDateT:
		return colType{typ: ctInt32, name: semDate, version: 1}, nil
	case oidTimestampT:
		// getTimePrecision is the JDBC scale: the typmod, 6 when unset.
		// adaptive: <= 3 digits Timestamp (millis), else MicroTimestamp.
		p := timePrecision(mod)
		if p <= 3 {
			return colType{typ: ctInt64, name: semTimestamp, version: 1, prec: p}, nil
		}
		return colType{typ: ctInt64, name: semMicroTimestamp, version: 1, prec: p}, nil
	case oidTimestamptzT:
		return colType{typ: ctString, name: semZonedTimestamp, version: 1, prec: timePrecision(mod)}, nil
	}
	return colType{}, fmt.Errorf("column type OID %d: walrelay does not reproduce Debezium's Connect schema for it; use the raw converter or a column of type text, varchar, uuid, json, jsonb, bytea, bool, int2/4/8, float4/8, date, timestamp or timestamptz", oid)
}

// schema returns the Connect schema of a column of type t.
func (t colType) schema(optional bool) *connect.Schema {
	s := &connect.Schema{Type: connectTypes[t.typ], Optional: optional, Name: t.name}
	if t.version > 0 {
		s.Version, s.HasVersion = int32(t.version), true
	}
	return s
}

// connectTypes maps the type names above to internal/connect's types.
var connectTypes = map[string]connect.Type{
	ctBoolean: connect.TypeBoolean, ctInt16: connect.TypeInt16, ctInt32: connect.TypeInt32,
	ctInt64: connect.TypeInt64, ctFloat32: connect.TypeFloat32, ctFloat64: connect.TypeFloat64,
	ctBytes: connect.TypeBytes, ctString: connect.TypeString,
}

// timePrecision is a timestamp column's fractional digits: its type
// modifier, or 6 when it has none.
func timePrecision(mod int32) int {
	if mod < 0 || mod > 6 {
		return 6
	}
	return int(mod)
}

// debeziumValue converts a column's text (pgoutput text format, walrelay's
// session settings: DateStyle ISO, TimeZone UTC, bytea_output hex) into the
// Go form of the Connect value Debezium sends for it: bool, int16, int32,
// int64, float32, float64, string or []byte.
func debeziumValue(t colType, d []byte) (any, error) {
	switch t.typ {
	case ctBoolean:
		return parseBool(d)
	case ctInt16:
		v, err := strconv.ParseInt(string(d), 10, 16)
		return int16(v), err
	case ctInt32:
		if t.name == semDate {
			tm, err := parseTimestamp(d)
			if err != nil {
				return nil, err
			}
			days := tm.Unix() / 86400
			if tm.Unix()%86400 < 0 {
				days-- // floor, as LocalDate.toEpochDay
			}
			return int32(days), nil
		}
		v, err := strconv.ParseInt(string(d), 10, 32)
		return int32(v), err
	case ctInt64:
		switch t.name {
		case semTimestamp, semMicroTimestamp:
			tm, err := parseTimestamp(d)
			if err != nil {
				return nil, err
			}
			if t.name == semTimestamp {
				return tm.UnixMilli(), nil
			}
			return tm.UnixMicro(), nil
		}
		return strconv.ParseInt(string(d), 10, 64)
	case ctFloat32:
		v, err := strconv.ParseFloat(string(d), 32)
		return float32(v), err
	case ctFloat64:
		return strconv.ParseFloat(string(d), 64)
	case ctBytes:
		n, err := decodedLen(d, kindBytea)
		if err != nil {
			return nil, err
		}
		b := make([]byte, n)
		return b, decodeInto(b, d, kindBytea)
	case ctString:
		if t.name == semZonedTimestamp {
			tm, err := parseTimestamp(d)
			if err != nil {
				return nil, err
			}
			return zonedTimestamp(tm, t.prec)
		}
		return string(d), nil
	}
	return nil, fmt.Errorf("no value conversion for Connect type %s", t.typ)
}

// zonedTimestamp formats t as Debezium's ZonedTimestamp does for a
// timestamptz column of the given fractional digits: UTC, ISO 8601 with
// exactly that many fraction digits (ZonedTimestamp.getDateTimeFormatter),
// or, for 0 digits, Java's ISO_OFFSET_DATE_TIME, whose fraction is as short
// as the value allows and absent when zero; "Z" for the UTC offset.
func zonedTimestamp(t time.Time, prec int) (string, error) {
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return "", fmt.Errorf("timestamp %s: walrelay does not reproduce Java's formatting of years outside 0000-9999", t.Format(time.RFC3339Nano))
	}
	if prec <= 0 {
		return t.Format("2006-01-02T15:04:05.999999999Z"), nil
	}
	layout := "2006-01-02T15:04:05." + "000000000"[:prec] + "Z"
	return t.Format(layout), nil
}

// Column defaults, as Debezium's PostgresDefaultValueConverter reads the
// DEFAULT expression the JDBC driver reports (pg_get_expr's text):
// debezium-connector-postgres/src/main/java/io/debezium/connector/postgresql/connection/PostgresDefaultValueConverter.java.
var (
	// literalDefault is LITERAL_DEFAULT_PATTERN: the first quoted literal.
	literalDefault = regexp.MustCompile(`'([^']*(?:''[^']*)*)'`)
	// functionDefault is FUNCTION_DEFAULT_PATTERN (found, not matched whole).
	functionDefault = regexp.MustCompile(`^[(]?[A-Za-z0-9_.]+\((?:.+(?:, ?.+)*)?\)`)
)

// currentDateTimes is CURRENT_DATE_TIMES, compared in lower case.
var currentDateTimes = map[string]bool{"current_timestamp": true, "current_time": true, "current_date": true, "localtime": true, "localtimestamp": true}

// defaultPlaceholders holds, per column type OID Debezium has a default
// mapper for (createDefaultValueMappers), the value it takes for a default
// a function computes (now(), gen_random_uuid(), nextval(...)); it has
// none for the other types (bytea, name, ...), whose columns get no
// default.
var defaultPlaceholders = map[uint32]string{
	oidBool: "false", oidBPChar: "", oidVarcharT: "", oidTextT: "",
	oidFloat4: "0.0", oidFloat8: "0.0", oidInt2: "0", oidInt4: "0", oidInt8: "0",
	oidJSON: "{}", oidJSONB: "{}", oidUUIDT: "00000000-0000-0000-0000-000000000000",
	oidDateT: "1970-01-01", oidTimestampT: "1970-01-01", oidTimestamptzT: "1970-01-01",
}

// trimmedDefaults are the TRIM_DATA_TYPES walrelay handles: their
// expression is trimmed before it is read.
var trimmedDefaults = map[uint32]bool{
	oidBool: true, oidFloat4: true, oidFloat8: true, oidInt2: true, oidInt4: true, oidInt8: true,
	oidUUIDT: true, oidDateT: true, oidTimestampT: true, oidTimestamptzT: true,
}

// debeziumDefault returns the Connect default value Debezium gives a
// column of type oid (Connect type t) whose DEFAULT expression is expr,
// and false when it gives none: no mapper for the type, a NULL default
// (NULL::type), or an expression it cannot parse (Debezium logs "Cannot
// parse column default value" and goes on without one).
func debeziumDefault(oid uint32, t colType, expr string) (any, bool) {
	placeholder, ok := defaultPlaceholders[oid]
	if !ok {
		return nil, false
	}
	if trimmedDefaults[oid] {
		expr = strings.TrimSpace(expr)
	}
	text, null := expr, false
	switch {
	case functionDefault.MatchString(expr) || currentDateTimes[strings.ToLower(expr)]:
		text = placeholder
	case !strings.Contains(expr, "'"):
		// A raw value (1234, true), or NULL::type.
		null = strings.HasPrefix(expr, "NULL::")
	default:
		m := literalDefault.FindStringSubmatch(expr)
		if m == nil {
			return nil, false
		}
		text = strings.ReplaceAll(m[1], "''", "'")
	}
	if null {
		return nil, false
	}
	var (
		v   any
		err error
	)
	switch oid {
	case oidBool:
		v = strings.EqualFold(text, "true") // Boolean.parseBoolean
	case oidUUIDT:
		// UUID.fromString then toString: lower case.
		if len(text) != 36 || text[8] != '-' || text[13] != '-' || text[18] != '-' || text[23] != '-' {
			return nil, false
		}
		if _, err := hex.DecodeString(strings.ReplaceAll(text, "-", "")); err != nil {
			return nil, false
		}
		v = strings.ToLower(text)
	case oidFloat4, oidFloat8, oidInt2, oidInt4, oidInt8, oidDateT, oidTimestampT, oidTimestamptzT:
		// Parsed as the column's own text would be (Short.parseShort, …,
		// TimestampUtils), then converted by the column's converter.
		v, err = debeziumValue(t, []byte(text))
	default: // text types, json, jsonb: the text itself
		v = text
	}
	if err != nil {
		return nil, false
	}
	return v, true
}
