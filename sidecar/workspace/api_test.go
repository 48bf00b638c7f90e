package workspace

import (
	"reflect"
	"strings"
	"testing"
)

// driven are the packages the domain drives: their values stay inside it
// (convert.go makes the domain's own of their answers).
var driven = []string{
	"github.com/patina-dev/patina/session",
	"github.com/patina-dev/patina/worktree",
	"github.com/patina-dev/patina/sidecar/agent",
}

// TestManagerSpeaksItsOwnValues fails when a method of Manager takes or
// returns a value of a package the domain drives (session, worktree, the
// agent and its protocol), in its signature or inside a value of it
// (fields, elements, callbacks, an interface's methods). Config and the
// interfaces the composition root implements (Engine, Disks, ...) are not
// the adapters' API and are left out.
func TestManagerSpeaksItsOwnValues(t *testing.T) {
	mt := reflect.TypeFor[*Manager]()
	seen := map[reflect.Type]bool{}
	var check func(where string, typ reflect.Type)
	check = func(where string, typ reflect.Type) {
		if seen[typ] {
			return
		}
		seen[typ] = true
		if p := typ.PkgPath(); p != "" {
			for _, d := range driven {
				if p == d || strings.HasPrefix(p, d+"/") {
					t.Errorf("%s: %s is %s's; the domain speaks its own values", where, typ, p)
				}
			}
		}
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Chan:
			check(where, typ.Elem())
		case reflect.Map:
			check(where, typ.Key())
			check(where, typ.Elem())
		case reflect.Func:
			for i := range typ.NumIn() {
				check(where, typ.In(i))
			}
			for i := range typ.NumOut() {
				check(where, typ.Out(i))
			}
		case reflect.Struct:
			for i := range typ.NumField() {
				if f := typ.Field(i); f.IsExported() {
					check(where+"."+f.Name, f.Type)
				}
			}
		case reflect.Interface:
			for i := range typ.NumMethod() {
				check(where+"."+typ.Method(i).Name, typ.Method(i).Type)
			}
		}
	}
	for i := range mt.NumMethod() {
		m := mt.Method(i)
		check("Manager."+m.Name, m.Type)
	}
	if mt.NumMethod() < 30 || len(seen) < 30 {
		t.Fatalf("looked at %d methods and %d types: the walk is broken", mt.NumMethod(), len(seen))
	}
}
