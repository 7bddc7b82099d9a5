package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"
)

// explainFlagError says what a flag's value must be instead of the parser
// that refused it (`invalid argument "abc" for "--limit" flag:
// strconv.ParseInt: parsing "abc": invalid syntax`). Other errors are
// returned unchanged.
func explainFlagError(err error) error {
	var iv *pflag.InvalidValueError
	if !errors.As(err, &iv) || iv.GetFlag() == nil {
		return err
	}
	f := iv.GetFlag()
	var want string
	switch f.Value.Type() {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		want = "a whole number"
		if f.DefValue != "" {
			want += " (default " + f.DefValue + ")"
		}
		if errors.Is(err, strconv.ErrRange) {
			want = "a whole number in range"
		}
	case "float32", "float64":
		want = "a number"
	case "bool":
		want = "true or false (or the flag alone for true)"
	case "duration":
		want = "a duration with its unit, such as 30s, 5m or 1h"
	default:
		return err
	}
	return fmt.Errorf("--%s %q: want %s", f.Name, iv.GetValue(), want)
}
