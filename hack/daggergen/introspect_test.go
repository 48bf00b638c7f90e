package main

import (
	"encoding/json"
	"testing"

	"github.com/dagger/dagger/cmd/codegen/introspection"
)

const testSDL = `
"""Marks experimental things."""
directive @experimental(reason: String! = "Not stabilized") on FIELD_DEFINITION | ARGUMENT_DEFINITION

"""A thing."""
type Thing implements Node {
  id: ThingID!
  """Old name."""
  old: String! @deprecated
  renamed: String! @deprecated(reason: "use name")
  name(upper: Boolean = false, tags: [String!] = []): String! @experimental(reason: "try it")
  _hidden: String
}

interface Node {
  id: ThingID!
}

scalar ThingID

input Opts {
  level: Int! = 3
}

enum Compression {
  Gzip
  GZIP
  Zstd
}

type Query {
  thing(opts: Opts): Thing
}
`

func TestIntrospect(t *testing.T) {
	resp, err := introspect(testSDL, "v0.20.6", []enumAlias{{Alias: "GZIP", Target: "Gzip"}, {Alias: "OTHER", Target: "Zstd"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.SchemaVersion != "v0.20.6" {
		t.Errorf("schema version: exp v0.20.6, got %q", resp.SchemaVersion)
	}
	s := resp.Schema
	if s.QueryType.Name != "Query" || s.MutationType != nil {
		t.Errorf("root types: got query %q mutation %v", s.QueryType.Name, s.MutationType)
	}
	for i := 1; i < len(s.Types); i++ {
		if s.Types[i-1].Name >= s.Types[i].Name {
			t.Fatalf("types not sorted: %q before %q", s.Types[i-1].Name, s.Types[i].Name)
		}
	}

	thing := s.Types.Get("Thing")
	if thing == nil || thing.Kind != introspection.TypeKindObject || thing.Description != "A thing." {
		t.Fatalf("Thing: got %+v", thing)
	}
	if len(thing.Interfaces) != 1 || thing.Interfaces[0].Name != "Node" || thing.Interfaces[0].Kind != introspection.TypeKindInterface {
		t.Errorf("Thing interfaces: got %+v", thing.Interfaces)
	}
	fields := map[string]*introspection.Field{}
	for _, f := range thing.Fields {
		fields[f.Name] = f
	}
	if _, ok := fields["_hidden"]; ok {
		t.Error("fields starting with _ must be hidden")
	}
	if f := fields["old"]; f == nil || !f.IsDeprecated || f.DeprecationReason == nil || *f.DeprecationReason != "No longer supported" {
		t.Errorf("old: exp deprecated with the default reason, got %+v", f)
	}
	if f := fields["renamed"]; f == nil || f.DeprecationReason == nil || *f.DeprecationReason != "use name" {
		t.Errorf("renamed: exp reason %q, got %+v", "use name", f)
	}
	id := fields["id"]
	if id.TypeRef.Kind != introspection.TypeKindNonNull || id.TypeRef.OfType.Kind != introspection.TypeKindScalar || id.TypeRef.OfType.Name != "ThingID" {
		t.Errorf("id type: got %+v / %+v", id.TypeRef, id.TypeRef.OfType)
	}
	name := fields["name"]
	if !name.Directives.IsExperimental() || name.Directives.ExperimentalReason() != "try it" {
		t.Errorf("name: exp @experimental(reason: \"try it\"), got %+v", name.Directives)
	}
	if len(name.Args) != 2 || *name.Args[0].DefaultValue != "false" || *name.Args[1].DefaultValue != "[]" {
		t.Errorf("name args: got %+v", name.Args)
	}
	tags := name.Args[1].TypeRef
	if tags.Kind != introspection.TypeKindList || tags.OfType.Kind != introspection.TypeKindNonNull || tags.OfType.OfType.Name != "String" {
		t.Errorf("tags type: got %+v", tags)
	}

	opts := s.Types.Get("Opts")
	if opts.Kind != introspection.TypeKindInputObject || len(opts.InputFields) != 1 || *opts.InputFields[0].DefaultValue != "3" {
		t.Errorf("Opts: got %+v", opts)
	}

	comp := s.Types.Get("Compression")
	var values []string
	for _, v := range comp.EnumValues {
		values = append(values, v.Name+"="+v.Directives.EnumValue())
	}
	exp := `["Gzip=","GZIP=Gzip","Zstd="]`
	if got, _ := json.Marshal(values); string(got) != exp {
		t.Errorf("enum values: exp %s, got %s", exp, got)
	}

	var dirNames []string
	for _, d := range s.Directives {
		dirNames = append(dirNames, d.Name)
	}
	for i := 1; i < len(dirNames); i++ {
		if dirNames[i-1] >= dirNames[i] {
			t.Fatalf("directives not sorted: %v", dirNames)
		}
	}

	// The result must survive the JSON round trip codegen normally reads.
	js, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	var back introspection.Response
	if err := json.Unmarshal(js, &back); err != nil || back.Schema.Types.Get("Thing") == nil {
		t.Fatalf("round trip: %v", err)
	}
}

func TestIntrospectRejectsBadSchema(t *testing.T) {
	if _, err := introspect("type Query { x: Missing }", "v0.20.6", nil); err == nil {
		t.Error("exp an error for an unknown type")
	}
}
