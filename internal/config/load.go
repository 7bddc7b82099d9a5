package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
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

// BindFlags registers one flag per field plus --config, each marked as
// the configuration's (IsConfigFlag) so a command's help can list them
// apart from its own. Each flag holds the text given, which Load parses
// like the environment, and reports its option's type (duration, int,
// strings...) for the help. A boolean option's flag is a boolean flag to
// pflag: a bare --http.pprof means true, and --kafka.create_topics=false
// takes the value after "=" (a value after a space is an argument, as
// with every boolean flag).
func BindFlags(fs *pflag.FlagSet) {
	def := Default()
	fs.String(ConfigFlag, "", "YAML config file (also "+EnvPrefix+"CONFIG)")
	markConfigFlag(fs, ConfigFlag)
	for _, f := range Fields(&def) {
		d := f.Default
		if f.Secret {
			d = ""
		}
		if f.value.Kind() == reflect.Bool {
			fs.VarPF(&boolFlag{s: d}, f.Flag, "", f.Help).NoOptDefVal = "true"
		} else {
			fs.Var(&optionFlag{s: d, typ: typeName(f.value)}, f.Flag, f.Help)
		}
		markConfigFlag(fs, f.Flag)
	}
}

// configFlagAnnotation marks the flags BindFlags registers.
const configFlagAnnotation = "walrelay_config_option"

func markConfigFlag(fs *pflag.FlagSet, name string) {
	_ = fs.SetAnnotation(name, configFlagAnnotation, []string{"true"}) // the flag was just added
}

// IsConfigFlag reports whether f is one of the flags BindFlags registers:
// --config or an option of the configuration.
func IsConfigFlag(f *pflag.Flag) bool {
	_, ok := f.Annotations[configFlagAnnotation]
	return ok
}

// boolFlag is a boolean option's flag. It keeps the text given, which Load
// parses (so "maybe" is an error naming the option and the flag), and
// reports the type bool, which pflag's help shows as a switch.
type boolFlag struct{ s string }

func (b *boolFlag) String() string     { return b.s }
func (b *boolFlag) Set(s string) error { b.s = s; return nil }
func (b *boolFlag) Type() string       { return "bool" }

// optionFlag is any other option's flag: the text given, which Load
// parses, and the option's type for the help.
type optionFlag struct{ s, typ string }

func (o *optionFlag) String() string     { return o.s }
func (o *optionFlag) Set(s string) error { o.s = s; return nil }
func (o *optionFlag) Type() string       { return o.typ }

// typeName names the type of an option's value as the help shows it.
func typeName(v reflect.Value) string {
	switch {
	case v.Type() == reflect.TypeFor[time.Duration]():
		return "duration"
	case v.CanInt():
		return "int"
	case v.Kind() == reflect.Slice:
		return "strings"
	case v.Kind() == reflect.Map:
		return "key=value,..."
	}
	return "string"
}

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
		if err := loadFile(path, fields, sources); err != nil {
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
		names := make([]string, 0, len(known))
		for k := range known {
			names = append(names, k)
		}
		sort.Strings(names)
		for i, u := range unknown {
			unknown[i] = boundText(u, maxErrValue)
			if s := suggest(u, names); s != "" {
				unknown[i] += " (did you mean " + s + "?)"
			}
		}
		what := "variable"
		if len(unknown) > 1 {
			what = "variables"
		}
		return Config{}, fmt.Errorf("unknown environment %s %s (run `walrelay config --list` to list the valid ones)", what, strings.Join(unknown, ", "))
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
			return fail(durationReason(s))
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
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, v.Type().Bits())
		if errors.Is(err, strconv.ErrRange) {
			lo, hi := intRange(v.Type().Bits())
			return fail(fmt.Sprintf("out of range: a whole number from %d to %d", lo, hi))
		} else if err != nil {
			return fail("not a whole number")
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

// durationReason says why s is not a duration, with the fix when it is a
// number without a unit (30: write 30s).
func durationReason(s string) string {
	if t := strings.TrimSpace(s); len(t) <= maxErrValue && plainNumber.MatchString(t) {
		return fmt.Sprintf("a duration needs a unit: write %ss (units: ms, s, m, h)", t)
	}
	return "not a duration like 500ms, 30s or 1m30s"
}

// plainNumber is a decimal number as a duration without its unit is
// written: 30, 0.5.
var plainNumber = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// intRange is the range of a signed integer of bits bits.
func intRange(bits int) (lo, hi int64) {
	hi = 1<<(bits-1) - 1
	return -hi - 1, hi
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
