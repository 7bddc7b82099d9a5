package testenv

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// EnvRequirePyAvro, when set to anything but "", makes DecodeAvro fail the
// test instead of skipping it when Debian's python3-avro cannot be imported
// (CI sets it, and .ci/run installs the package).
const EnvRequirePyAvro = "WALRELAY_REQUIRE_PYAVRO"

// pyAvroPython is Debian's interpreter: python3-avro is installed for it only,
// not for a pyenv or venv python3 that may come first on PATH.
const pyAvroPython = "/usr/bin/python3"

// pyAvroNoModule is the exit code of pyAvroScript when `import avro` fails.
const pyAvroNoModule = 3

// pyAvroScript decodes Avro binary bodies with Apache Avro's Python library
// (Debian's python3-avro, Avro 1.11.1): avro.schema.parse, then
// avro.io.DatumReader over avro.io.BinaryDecoder, the reader Python
// consumers use. It reads {"schema": text, "bodies": [hex...]} on stdin and
// prints one JSON document: a list with, per body, {"v": value} or
// {"error": text}. A body with bytes left after the datum is an error.
//
// Values that JSON lacks are rendered so that Go tests can compare them:
// bytes and fixed as lowercase hex strings; decimal (Python's Decimal) as
// its str(); datetime, date and time (timestamp-*, date, time-*) as
// isoformat(); UUID as str(); NaN and infinities as the strings "NaN",
// "Infinity", "-Infinity". A top-level "bytes" schema is Confluent's
// special case (KafkaAvroSerializer writes the bytes without a length
// prefix, AbstractKafkaAvroSerializer.writeBytes): the body is returned as
// is, hex.
const pyAvroScript = `
import sys, json, io, math, datetime, decimal, uuid
try:
    import avro.schema, avro.io
except ImportError as e:
    sys.stderr.write("import avro: %s\n" % e)
    sys.exit(3)

def plain(v):
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return v
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return v
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    raise TypeError("cannot render %r" % type(v))

req = json.load(sys.stdin)
schema = avro.schema.parse(req["schema"])
raw_bytes = schema.type == "bytes"
reader = avro.io.DatumReader(schema)
out = []
for h in req["bodies"]:
    body = bytes.fromhex(h)
    if raw_bytes:
        out.append({"v": body.hex()})
        continue
    try:
        buf = io.BytesIO(body)
        v = reader.read(avro.io.BinaryDecoder(buf))
        if buf.tell() != len(body):
            raise ValueError("%d bytes left after the datum" % (len(body) - buf.tell()))
        out.append({"v": plain(v)})
    except Exception as e:
        out.append({"error": "%s: %s" % (type(e).__name__, e)})
json.dump(out, sys.stdout, sort_keys=True)
`

// DecodeAvro decodes one Avro binary body (no Confluent header) written with
// schema, using Apache Avro's Python library independently of any Go code,
// for tests that check what lands on Kafka. See DecodeAvroBatch.
func DecodeAvro(tb testing.TB, schema string, body []byte) any {
	tb.Helper()
	return DecodeAvroBatch(tb, schema, [][]byte{body})[0]
}

// DecodeAvroBatch decodes many bodies of one schema in one Python process.
// The values are JSON decoded with json.Decoder.UseNumber (numbers are
// json.Number, exact), records and maps map[string]any, arrays []any, bytes
// and fixed lowercase hex strings, decimals strings, logical date and time
// types Python's isoformat() (see pyAvroScript). A body Python cannot decode
// fails the test with Python's message.
//
// The test is skipped when `import avro` fails under /usr/bin/python3
// (apt-get install python3-avro), unless WALRELAY_REQUIRE_PYAVRO is set: then
// it fails.
func DecodeAvroBatch(tb testing.TB, schema string, bodies [][]byte) []any {
	tb.Helper()
	res, err := decodeAvroPython(schema, bodies)
	if err != nil {
		skipNoPyAvro(tb, err)
		tb.Fatalf("decoding Avro with python3-avro: %v", err)
	}
	out := make([]any, len(res))
	for i, r := range res {
		if r.Error != "" {
			tb.Fatalf("python3-avro cannot decode body %d (%x): %s", i, bodies[i], r.Error)
		}
		out[i] = r.V
	}
	return out
}

// skipNoPyAvro skips the test when err says python3-avro is missing, or
// fails it when WALRELAY_REQUIRE_PYAVRO is set.
func skipNoPyAvro(tb testing.TB, err error) {
	tb.Helper()
	if !errors.Is(err, errNoPyAvro) {
		return
	}
	if os.Getenv(EnvRequirePyAvro) != "" {
		tb.Fatalf("python3-avro is required (%s is set): %v", EnvRequirePyAvro, err)
	}
	tb.Skipf("needs Debian's python3-avro under %s (apt-get install -y python3-avro; set %s=1 to fail instead): %v", pyAvroPython, EnvRequirePyAvro, err)
}

// errNoPyAvro is returned by decodeAvroPython when /usr/bin/python3 is
// missing or cannot import avro.
var errNoPyAvro = errors.New("python3-avro not importable")

type pyAvroResult struct {
	V     any    `json:"v"`
	Error string `json:"error"`
}

// decodeAvroPython runs pyAvroScript once for all bodies.
func decodeAvroPython(schema string, bodies [][]byte) ([]pyAvroResult, error) {
	if _, err := os.Stat(pyAvroPython); err != nil {
		return nil, errors.Join(errNoPyAvro, err)
	}
	hexes := make([]string, len(bodies))
	for i, b := range bodies {
		hexes[i] = hex.EncodeToString(b)
	}
	in, err := json.Marshal(map[string]any{"schema": schema, "bodies": hexes})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(pyAvroPython, "-c", pyAvroScript)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == pyAvroNoModule {
			return nil, errors.Join(errNoPyAvro, errors.New(strings.TrimSpace(stderr.String())))
		}
		return nil, &pyAvroError{err: err, stderr: strings.TrimSpace(stderr.String())}
	}
	dec := json.NewDecoder(&stdout)
	dec.UseNumber()
	var res []pyAvroResult
	if err := dec.Decode(&res); err != nil {
		return nil, err
	}
	if len(res) != len(bodies) {
		return nil, &pyAvroError{err: errors.New("wrong number of results"), stderr: stdout.String()}
	}
	return res, nil
}

// pyAvroError is a failure of the Python process itself (a bad schema, a
// crash), with what it wrote on stderr.
type pyAvroError struct {
	err    error
	stderr string
}

func (e *pyAvroError) Error() string { return e.err.Error() + ": " + e.stderr }
func (e *pyAvroError) Unwrap() error { return e.err }
