package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// EnvPrefix starts every environment variable walrelay reads.
const EnvPrefix = "WALRELAY_"

// ConfigFlag names the flag (and, as WALRELAY_CONFIG, the variable) that
// points at the YAML file.
const ConfigFlag = "config"

// Field describes one leaf option of Config.
type Field struct {
	Path    string // YAML path: postgres.slot, router.route.by.field
	Env     string // WALRELAY_POSTGRES_SLOT
	Flag    string // postgres.slot (as --postgres.slot)
	Help    string
	Default string // the default, formatted as the environment would give it
	Secret  bool   // redacted wherever it is shown

	value reflect.Value
}

// Fields lists every option of c, in declaration order, with c's values
// as the defaults.
func Fields(c *Config) []Field {
	var out []Field
	walk(reflect.ValueOf(c).Elem(), "", &out)
	return out
}

func walk(v reflect.Value, prefix string, out *[]Field) {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		name := strings.Split(sf.Tag.Get("yaml"), ",")[0]
		if name == "" || name == "-" {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		fv := v.Field(i)
		if sf.Type.Kind() == reflect.Struct && sf.Type != reflect.TypeFor[time.Duration]() {
			walk(fv, path, out)
			continue
		}
		*out = append(*out, Field{
			Path:    path,
			Env:     EnvPrefix + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(path)),
			Flag:    path,
			Help:    sf.Tag.Get("help"),
			Default: format(fv),
			Secret:  sf.Tag.Get("secret") == "true",
			value:   fv,
		})
	}
}

// BindFlags registers one flag per field plus --config. Each flag holds
// the text given, which Load parses like the environment. A boolean
// option's flag is a boolean flag to pflag: a bare --http.pprof means
// true, and --kafka.create_topics=false takes the value after "=" (a value
// after a space is an argument, as with every boolean flag).
func BindFlags(fs *pflag.FlagSet) {
	def := Default()
	fs.String(ConfigFlag, "", "YAML config file (also "+EnvPrefix+"CONFIG)")
	for _, f := range Fields(&def) {
		d := f.Default
		if f.Secret {
			d = ""
		}
		if f.value.Kind() == reflect.Bool {
			fs.VarPF(&boolFlag{s: d}, f.Flag, "", f.Help).NoOptDefVal = "true"
			continue
		}
		fs.String(f.Flag, d, f.Help)
	}
}

// boolFlag is a boolean option's flag. It keeps the text given, which Load
// parses (so "maybe" is an error naming the option and the flag), and
// reports the type bool, which pflag's help shows as a switch.
type boolFlag struct{ s string }

func (b *boolFlag) String() string     { return b.s }
func (b *boolFlag) Set(s string) error { b.s = s; return nil }
func (b *boolFlag) Type() string       { return "bool" }

// Load builds a Config: defaults, then the YAML file named by --config or
// WALRELAY_CONFIG, then WALRELAY_* variables from environ, then the flags
// set on fs (fs may be nil). It validates the result.
func Load(fs *pflag.FlagSet, environ []string) (Config, error) {
	c := Default()
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, EnvPrefix) {
			env[k] = v
		}
	}
	path := env[EnvPrefix+"CONFIG"]
	if fs != nil && fs.Changed(ConfigFlag) {
		path, _ = fs.GetString(ConfigFlag)
	}
	fields := Fields(&c)
	// sources says where each option's value came from, for errors: the
	// last of the file, the environment and the flags to set it.
	sources := map[string]string{}
	if path != "" {
		if err := loadFile(&c, path, fields, sources); err != nil {
			return Config{}, err
		}
	}
	set := func(f Field, s, source string) error {
		if err := parse(f, s, source); err != nil {
			return err
		}
		sources[f.Path] = source
		return nil
	}
	known := map[string]bool{EnvPrefix + "CONFIG": true}
	for _, f := range fields {
		known[f.Env] = true
		if v, ok := env[f.Env]; ok {
			if err := set(f, v, f.Env); err != nil {
				return Config{}, err
			}
		}
		if !f.Secret {
			continue
		}
		// A secret may come from a file (Docker/Kubernetes secrets):
		// WALRELAY_X_FILE names it; a trailing newline is dropped.
		fileVar := f.Env + "_FILE"
		known[fileVar] = true
		if path, ok := env[fileVar]; ok {
			if _, both := env[f.Env]; both {
				return Config{}, fmt.Errorf("both %s and %s are set; set one", f.Env, fileVar)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return Config{}, fmt.Errorf("reading %s: %w", fileVar, err)
			}
			if err := set(f, strings.TrimRight(string(data), "\r\n"), fileVar); err != nil {
				return Config{}, err
			}
		}
	}
	if unknown := unknownEnv(env, known); len(unknown) > 0 {
		return Config{}, fmt.Errorf("unknown environment variables %s (run `walrelay config --list` to list the valid ones)", strings.Join(unknown, ", "))
	}
	if fs != nil {
		for _, f := range fields {
			if fs.Changed(f.Flag) {
				v := fs.Lookup(f.Flag).Value.String()
				if err := set(f, v, "--"+f.Flag); err != nil {
					return Config{}, err
				}
			}
		}
	}
	if err := c.validate(sources); err != nil {
		return Config{}, err
	}
	return c, nil
}

// loadFile decodes the YAML at path over c, rejecting unknown keys, and
// records in sources the file and line of each of fields it sets.
func loadFile(c *Config, path string, fields []Field, sources map[string]string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading config file: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) { // an empty file
			return nil
		}
		var te *yaml.TypeError
		if errors.As(err, &te) { // yaml.v3 puts each problem on a line of its own; keep one line
			return fmt.Errorf("parsing config file %s: %s", path, strings.Join(te.Errors, "; "))
		}
		return fmt.Errorf("parsing config file %s: %w", path, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("parsing config file %s: %w", path, err)
	}
	fileSources(&doc, path, fields, sources)
	return nil
}

// fileSources records in sources, for each of fields the YAML document
// doc sets, where: the file's path and the line of the key,
// "walrelay.yaml:12".
func fileSources(doc *yaml.Node, path string, fields []Field, sources map[string]string) {
	leaves := make(map[string]bool, len(fields))
	for _, f := range fields {
		leaves[f.Path] = true
	}
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, child := range n.Content {
				walk(child, prefix)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				key, value := n.Content[i], n.Content[i+1]
				p := key.Value
				if prefix != "" {
					p = prefix + "." + key.Value
				}
				if leaves[p] {
					sources[p] = fmt.Sprintf("%s:%d", path, key.Line)
				} else {
					walk(value, p)
				}
			}
		}
	}
	walk(doc, "")
}

func unknownEnv(env map[string]string, known map[string]bool) []string {
	var out []string
	for k := range env {
		if !known[k] && !notConfig(k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// notConfig reports the WALRELAY_ variables that are not config fields:
// the test harness's and the Postgres binary lookup's.
func notConfig(name string) bool {
	return strings.HasPrefix(name, EnvPrefix+"TEST_") || name == EnvPrefix+"PG_BIN"
}

// parse parses s into f's value; source names where s came from for the
// error.
func parse(f Field, s, source string) error {
	shown := s
	if f.Secret {
		shown = Redact(s)
	}
	fail := func(reason string) error {
		return &FieldError{Field: f.Path, Value: shown, Reason: reason, Source: source}
	}
	v := f.value
	switch {
	case v.Type() == reflect.TypeFor[time.Duration]():
		d, err := time.ParseDuration(s)
		if err != nil {
			return fail("not a duration like 500ms or 30s")
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fail("not a boolean (true or false)")
		}
		v.SetBool(b)
	case v.CanInt():
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return fail(fmt.Sprintf("not an integer of %d bits", v.Type().Bits()))
		}
		v.SetInt(n)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		v.Set(reflect.ValueOf(splitList(s)))
	case v.Kind() == reflect.Map:
		m, ok := splitMap(s)
		if !ok {
			return fail(mapSyntax)
		}
		v.Set(reflect.ValueOf(m))
	default:
		return fail("unsupported field type " + v.Type().String())
	}
	return nil
}

// mapSyntax says how a map option is written as one string.
const mapSyntax = "entries are key=value, comma-separated"

// splitMap parses "k1=v1, k2=v2" (entries trimmed, empty ones dropped);
// false when an entry has no "=" or an empty key.
func splitMap(s string) (map[string]string, bool) {
	m := map[string]string{}
	for _, kv := range splitList(s) {
		k, val, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, false
		}
		m[k] = val
	}
	return m, true
}

// splitList splits a comma-separated list, trimming each item and
// dropping empty ones.
func splitList(s string) []string {
	out := []string{}
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// format renders a value the way the environment would give it.
func format(v reflect.Value) string {
	switch {
	case v.Type() == reflect.TypeFor[time.Duration]():
		return time.Duration(v.Int()).String()
	case v.Kind() == reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = v.Index(i).String()
		}
		return strings.Join(parts, ",")
	case v.Kind() == reflect.Map:
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + v.MapIndex(reflect.ValueOf(k)).String()
		}
		return strings.Join(parts, ",")
	default:
		return fmt.Sprint(v.Interface())
	}
}

// String renders c as YAML with secrets redacted.
func (c Config) String() string {
	out, err := yaml.Marshal(c.Redacted())
	if err != nil {
		return fmt.Sprintf("<config: %v>", err)
	}
	return string(out)
}
