package config_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/walrelay/walrelay/internal/config"
	"github.com/walrelay/walrelay/internal/router"
)

// relay.on_error has one option per class of router.OnErrorClasses, named
// as the class (its YAML key is the class's String form, the name the
// metrics and the dead-letter header use), and Policy reads that option.
// A class added to the list without its option, or an option without its
// class, fails here.
func TestErrorPoliciesFollowTheClasses(t *testing.T) {
	var p config.ErrorPolicies
	rv := reflect.ValueOf(&p).Elem()
	byKey := map[string]reflect.Value{}
	for i := range rv.NumField() {
		key, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("yaml"), ",")
		byKey[key] = rv.Field(i)
	}
	classes := router.OnErrorClasses()
	if len(byKey) != len(classes) {
		t.Errorf("relay.on_error has %d options, router.OnErrorClasses %d classes", len(byKey), len(classes))
	}
	for _, c := range classes {
		f, ok := byKey[c.String()]
		if !ok {
			t.Errorf("class %s has no relay.on_error option", c)
			continue
		}
		f.SetString("policy-of-" + c.String())
		if got, ok := p.Policy(c); !ok || got != "policy-of-"+c.String() {
			t.Errorf("Policy(%s) = %q, %v; want relay.on_error.%s's value", c, got, ok, c)
		}
	}
	if _, ok := p.Policy(router.ClassColumnMissing); ok {
		t.Error("Policy(column_missing) found a policy; a missing column stops walrelay at startup")
	}
}
