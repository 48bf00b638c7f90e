package sidecar

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/workspace"
)

// TestWorkspaceWire translates fully populated values each way and
// compares them field by field, by name: a field added on one side only,
// or one the translation forgets, fails it.
func TestWorkspaceWire(t *testing.T) {
	in := func(t *testing.T, wire, dom any) {
		t.Helper()
		sameFields(t, reflect.TypeOf(wire).Name(), reflect.ValueOf(wire), reflect.ValueOf(dom))
	}
	t.Run("create", func(t *testing.T) {
		r := filled[client.CreateWorkspaceRequest]()
		in(t, r, createRequest(r))
		r.Network = nil
		if d := createRequest(r); d.Network != nil {
			t.Errorf("no network: exp nil, got %+v", d.Network)
		}
	})
	t.Run("fork", func(t *testing.T) {
		r := filled[client.ForkWorkspaceRequest]()
		in(t, r, forkRequest(r))
	})
	t.Run("snapshot", func(t *testing.T) {
		r := filled[client.SnapshotWorkspaceRequest]()
		in(t, r, snapshotRequest(r))
	})
	t.Run("forward", func(t *testing.T) {
		r := filled[client.ForwardPortRequest]()
		in(t, r, forwardPortRequest(r))
	})
	t.Run("template", func(t *testing.T) {
		r := filled[client.BuildTemplateRequest]()
		in(t, r, buildTemplateRequest(r))
	})
	t.Run("network", func(t *testing.T) {
		r := filled[client.NetworkPolicy]()
		in(t, r, networkPolicy(r))
	})
	t.Run("workspace", func(t *testing.T) {
		w := filled[workspace.Info]()
		in(t, workspaceView(w), w)
		w.Agent, w.Ports = nil, nil
		if v := workspaceView(w); v.Agent != nil || v.Ports != nil {
			t.Errorf("no agent, no ports: exp nil, got %+v, %+v", v.Agent, v.Ports)
		}
	})
	t.Run("port", func(t *testing.T) {
		p := filled[workspace.PortForward]()
		in(t, portView(p), p)
	})
	t.Run("lists", func(t *testing.T) {
		if v := workspaceViews(nil); v == nil {
			t.Error("workspaceViews(nil): exp [], got nil")
		}
		if v := portViews(nil); v == nil {
			t.Error("portViews(nil): exp [], got nil")
		}
	})
}

// The domain's names are the API's: statuses, network modes, signals.
func TestWorkspaceNamesAreTheAPIs(t *testing.T) {
	if workspace.MaxForkCount != client.MaxForkCount {
		t.Errorf("fork count bound: domain %d, API %d", workspace.MaxForkCount, client.MaxForkCount)
	}
	for d, c := range map[workspace.Status]string{
		workspace.StatusRunning: client.StatusRunning, workspace.StatusStopped: client.StatusStopped, workspace.StatusAdopting: client.StatusAdopting,
	} {
		if string(d) != c {
			t.Errorf("status: exp %q, got %q", c, d)
		}
	}
	for d, c := range map[string]string{
		workspace.NetworkNone: client.NetworkNone, workspace.NetworkOpen: client.NetworkOpen, workspace.NetworkAllow: client.NetworkAllow,
	} {
		if d != c {
			t.Errorf("network mode: exp %q, got %q", c, d)
		}
	}
	if !slices.Equal(workspace.Signals, client.Signals) {
		t.Errorf("signals: exp the API's %v, got %v", client.Signals, workspace.Signals)
	}
	for _, s := range append(slices.Clone(client.Signals), "int", "SIGTERM", " Kill ", "sigusr1", "STOP", "", "SIG") {
		en, eok := client.SignalName(s)
		gn, gok := workspace.SignalName(s)
		if en != gn || eok != gok {
			t.Errorf("SignalName(%q): exp %q %v, got %q %v", s, en, eok, gn, gok)
		}
	}
}

// filled is a T whose every field, at every depth, holds a value that is
// not its zero and not any other field's.
func filled[T any]() T {
	var v T
	n := 0
	fill(reflect.ValueOf(&v).Elem(), &n)
	return v
}

var timeType = reflect.TypeFor[time.Time]()

func fill(v reflect.Value, n *int) {
	*n++
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(time.Unix(int64(1_700_000_000+*n), 0).UTC()))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", *n))
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), n)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, n)
		fill(e, n)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n)
			}
		}
	default:
		panic("fill: no value for a " + v.Type().String())
	}
}

// sameFields fails t where a (the wire's) and b (the domain's), values of
// a pair of types, differ: a field of one that the other lacks (by name),
// or a value.
func sameFields(t *testing.T, path string, a, b reflect.Value) {
	t.Helper()
	if a.Kind() != b.Kind() {
		t.Errorf("%s: a %s and a %s", path, a.Type(), b.Type())
		return
	}
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				t.Errorf("%s: one nil, one not", path)
			}
			return
		}
		sameFields(t, path, a.Elem(), b.Elem())
	case reflect.Struct:
		if a.Type() == timeType || b.Type() == timeType {
			if a.Type() != b.Type() || !a.Interface().(time.Time).Equal(b.Interface().(time.Time)) {
				t.Errorf("%s: wire %v, domain %v", path, a, b)
			}
			return
		}
		for _, f := range reflect.VisibleFields(a.Type()) {
			if _, ok := b.Type().FieldByName(f.Name); !ok && f.IsExported() {
				t.Errorf("%s.%s: %s has it, %s has not", path, f.Name, a.Type(), b.Type())
			}
		}
		for _, f := range reflect.VisibleFields(b.Type()) {
			if !f.IsExported() {
				continue
			}
			if _, ok := a.Type().FieldByName(f.Name); !ok {
				t.Errorf("%s.%s: %s has it, %s has not", path, f.Name, b.Type(), a.Type())
				continue
			}
			sameFields(t, path+"."+f.Name, a.FieldByName(f.Name), b.FieldByName(f.Name))
		}
	case reflect.Slice:
		if a.Len() != b.Len() || a.IsNil() != b.IsNil() {
			t.Errorf("%s: wire %d entries, domain %d", path, a.Len(), b.Len())
			return
		}
		for i := range a.Len() {
			sameFields(t, fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i))
		}
	case reflect.Map:
		if a.Len() != b.Len() {
			t.Errorf("%s: wire %d entries, domain %d", path, a.Len(), b.Len())
			return
		}
		for _, k := range a.MapKeys() {
			e := b.MapIndex(k.Convert(b.Type().Key()))
			if !e.IsValid() {
				t.Errorf("%s[%v]: missing", path, k)
				continue
			}
			sameFields(t, fmt.Sprintf("%s[%v]", path, k), a.MapIndex(k), e)
		}
	case reflect.String:
		if a.String() != b.String() {
			t.Errorf("%s: wire %q, domain %q", path, a.String(), b.String())
		}
	case reflect.Int, reflect.Int64:
		if a.Int() != b.Int() {
			t.Errorf("%s: wire %d, domain %d", path, a.Int(), b.Int())
		}
	case reflect.Float64:
		if a.Float() != b.Float() {
			t.Errorf("%s: wire %g, domain %g", path, a.Float(), b.Float())
		}
	case reflect.Bool:
		if a.Bool() != b.Bool() {
			t.Errorf("%s: wire %v, domain %v", path, a.Bool(), b.Bool())
		}
	default:
		t.Errorf("%s: cannot compare a %s", path, a.Type())
	}
}
