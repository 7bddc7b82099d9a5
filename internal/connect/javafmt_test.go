package connect

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Java's JDK 19+ Double.toString spec (JDK-4511638) and its examples: the
// shortest decimal, never the longer forms older JDKs printed.
func TestFormatDoubleJDK19(t *testing.T) {
	tests := []struct {
		name string
		in   float64
		want string
	}{
		{"one", 1, "1.0"},
		{"plain upper bound", 9999999, "9999999.0"},
		{"scientific from 1e7", 1e7, "1.0E7"},
		{"plain lower bound", 0.001, "0.001"},
		{"scientific below 1e-3", 1e-4, "1.0E-4"},
		{"seven digits scientific", 1.2345678e7, "1.2345678E7"},
		{"JDK-4511638 2e23", 2e23, "2.0E23"},
		{"JDK-4511638 1e23", 1e23, "1.0E23"},
		{"JDK-4511638 8.41e21", 8.41e21, "8.41E21"},
		{"JDK-4511638 2.82879384806159e17", 2.82879384806159e17, "2.82879384806159E17"},
		{"min value: two digits beat one", math.SmallestNonzeroFloat64, "4.9E-324"},
		// 1E-323 is the shortest, but among the one- and two-digit decimals
		// that read back, 9.9E-324 is the closest (JDK 17 printed 1.0E-323).
		{"twice min value: closest two digits", 2 * math.SmallestNonzeroFloat64, "9.9E-324"},
		{"negative zero", math.Copysign(0, -1), "-0.0"},
		{"NaN", math.NaN(), "NaN"},
		{"minus infinity", math.Inf(-1), "-Infinity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FormatDouble(tt.in); got != tt.want {
				t.Errorf("FormatDouble(%v) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
	if got := FormatFloat(math.SmallestNonzeroFloat32); got != "1.4E-45" {
		t.Errorf("FormatFloat(MIN_VALUE) = %s, want 1.4E-45", got)
	}
}

// readNumbers reads numbers.in and a Numbers.java output: what a JVM's
// Double.toString/Float.toString and Jackson (as JsonConverter writes a
// number) printed for each input.
func readNumbers(t *testing.T, out []byte) (ins []string, text, jackson []string, jvm string) {
	t.Helper()
	in, err := os.ReadFile("testdata/java/numbers.in")
	if err != nil {
		t.Fatal(err)
	}
	ins = strings.Split(strings.TrimSuffix(string(in), "\n"), "\n")
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "# java.version="); ok {
			jvm = v
			continue
		}
		a, b, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("output line %q has no tab", line)
		}
		text, jackson = append(text, a), append(jackson, b)
	}
	if len(ins) != len(text) {
		t.Fatalf("%d inputs, %d output lines", len(ins), len(text))
	}
	return ins, text, jackson, jvm
}

// checkNumbers compares FormatDouble, FormatFloat and appendJSONFloat with
// a JVM's output. Before JDK 19, the JVM may print a decimal no shorter
// than ours that reads back as the same number (JDK-4511638's longer
// forms, and 1.0E-323 for twice Double.MIN_VALUE); those are counted and
// logged. From JDK 19 on, every line must match.
func checkNumbers(t *testing.T, out []byte) {
	ins, text, jackson, jvm := readNumbers(t, out)
	major, _ := strconv.Atoi(strings.Split(jvm, ".")[0])
	older := 0
	for i, in := range ins {
		kind, bits, _ := strings.Cut(in, " ")
		u, err := strconv.ParseUint(bits, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		var gotJSON []byte
		bitSize := 64
		if kind == "f" {
			bitSize = 32
			f := math.Float32frombits(uint32(u))
			got, gotJSON = FormatFloat(f), appendJSONFloat(nil, float64(f), 32)
		} else {
			d := math.Float64frombits(u)
			got, gotJSON = FormatDouble(d), appendJSONFloat(nil, d, 64)
		}
		if got != text[i] {
			a, errA := strconv.ParseFloat(got, bitSize)
			b, errB := strconv.ParseFloat(text[i], bitSize)
			if major < 19 && errA == nil && errB == nil && a == b && len(got) <= len(text[i]) {
				older++
				t.Logf("%s: %s; JDK %s printed %s", in, got, jvm, text[i])
			} else {
				t.Errorf("%s: formatted %s, Java %s printed %s", in, got, jvm, text[i])
			}
			continue
		}
		if string(gotJSON) != jackson[i] {
			t.Errorf("%s: wrote JSON %s, Jackson wrote %s", in, gotJSON, jackson[i])
		}
	}
	t.Logf("%d of %d numbers printed differently by JDK %s", older, len(ins), jvm)
}

// testdata/java/numbers.golden is what JDK 17 and Jackson 2.14 printed.
func TestFormatMatchesJava(t *testing.T) {
	golden, err := os.ReadFile("testdata/java/numbers.golden")
	if err != nil {
		t.Fatal(err)
	}
	checkNumbers(t, golden)
}

// The JVM here, whatever its version, agrees too (skipped without java
// and Debian's Jackson jars); with the golden file's JVM version it
// prints the golden file exactly.
func TestFormatMatchesThisJVM(t *testing.T) {
	out := runJava(t, "Numbers.java", "testdata/java/numbers.in")
	checkNumbers(t, out)
	golden, err := os.ReadFile("testdata/java/numbers.golden")
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, jvm := readNumbers(t, out)
	_, _, _, goldenJVM := readNumbers(t, golden)
	if jvm == goldenJVM && !bytes.Equal(out, golden) {
		t.Errorf("JDK %s now prints something else than numbers.golden; regenerate it with the command in Numbers.java", jvm)
	}
}

// jacksonJars is Debian's libjackson2-databind-java.
const jacksonJars = "/usr/share/java/jackson-core.jar:/usr/share/java/jackson-databind.jar:/usr/share/java/jackson-annotations.jar"

// runJava runs a single-file Java program in testdata/java with stdin from
// the file input, or skips the test when java or the Jackson jars are
// missing.
func runJava(t *testing.T, program, input string) []byte {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("no java here: checked against the golden file only")
	}
	if _, err := os.Stat("/usr/share/java/jackson-databind.jar"); err != nil {
		t.Skip("no Jackson jars here (Debian: libjackson2-databind-java): checked against the golden file only")
	}
	in, err := os.Open(input)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	cmd := exec.Command("java", "-cp", jacksonJars, program)
	cmd.Dir = "testdata/java"
	cmd.Stdin = in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("running %s: %v\n%s", program, err, stderr.Bytes())
	}
	return out
}
