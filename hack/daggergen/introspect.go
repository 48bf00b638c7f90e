package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dagger/dagger/cmd/codegen/introspection"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
)

// introspect turns the engine's GraphQL schema in SDL form into the
// introspection response that dagger's codegen reads (the answer to
// introspection.Query).
//
// It mirrors what the engine's own introspection resolvers
// (github.com/dagger/dagger/dagql/introspection) compute from the same
// *ast.Schema, so that codegen sees what it would see from a live engine:
//   - types sorted by name; fields whose name starts with "_" hidden;
//   - deprecated fields, arguments and enum values included
//     (the query asks for includeDeprecated: true);
//   - deprecationReason is the raw "reason" argument, and "No longer supported"
//     for a field deprecated without one;
//   - default values and applied directive arguments rendered as GraphQL
//     literals (ast.Value.String);
//   - arguments marked @internal left out;
//   - enum members that aliases declares as another name for a member of
//     the same enum carry @enumValue(value: <target>), which the SDL omits.
func introspect(sdl, schemaVersion string, aliases []enumAlias) (*introspection.Response, error) {
	schema, gqlErr := gqlparser.LoadSchema(&ast.Source{Name: "schema.graphqls", Input: sdl})
	if gqlErr != nil {
		return nil, fmt.Errorf("parse schema: %w", gqlErr)
	}
	if schema.Query == nil {
		return nil, fmt.Errorf("parse schema: no query type")
	}

	out := &introspection.Schema{}
	out.QueryType.Name = schema.Query.Name
	if schema.Mutation != nil {
		out.MutationType = &struct {
			Name string `json:"name,omitempty"`
		}{Name: schema.Mutation.Name}
	}
	if schema.Subscription != nil {
		out.SubscriptionType = &struct {
			Name string `json:"name,omitempty"`
		}{Name: schema.Subscription.Name}
	}

	names := make([]string, 0, len(schema.Types))
	for name := range schema.Types {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t, err := convertType(schema, schema.Types[name], aliases)
		if err != nil {
			return nil, err
		}
		out.Types = append(out.Types, t)
	}

	dirNames := make([]string, 0, len(schema.Directives))
	for name := range schema.Directives {
		dirNames = append(dirNames, name)
	}
	sort.Strings(dirNames)
	for _, name := range dirNames {
		d := schema.Directives[name]
		def := &introspection.DirectiveDef{
			Name:        d.Name,
			Description: d.Description,
			Args:        introspection.InputValues{},
		}
		for _, loc := range d.Locations {
			def.Locations = append(def.Locations, string(loc))
		}
		for _, arg := range d.Arguments {
			if arg.Directives.ForName("internal") != nil {
				continue
			}
			v, err := convertInputValue(schema, arg.Name, arg.Description, arg.Type, arg.DefaultValue, arg.Directives)
			if err != nil {
				return nil, fmt.Errorf("directive @%s: %w", d.Name, err)
			}
			def.Args = append(def.Args, v)
		}
		out.Directives = append(out.Directives, def)
	}

	return &introspection.Response{Schema: out, SchemaVersion: schemaVersion}, nil
}

func convertType(schema *ast.Schema, def *ast.Definition, aliases []enumAlias) (*introspection.Type, error) {
	t := &introspection.Type{
		Kind:        introspection.TypeKind(def.Kind),
		Name:        def.Name,
		Description: def.Description,
		Interfaces:  []*introspection.Type{},
		Directives:  directiveApplications(def.Directives),
	}
	switch def.Kind {
	case ast.Object, ast.Interface:
		for _, f := range def.Fields {
			if strings.HasPrefix(f.Name, "_") {
				continue
			}
			field, err := convertField(schema, f)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", def.Name, f.Name, err)
			}
			t.Fields = append(t.Fields, field)
		}
	case ast.InputObject:
		for _, f := range def.Fields {
			v, err := convertInputValue(schema, f.Name, f.Description, f.Type, f.DefaultValue, f.Directives)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", def.Name, f.Name, err)
			}
			t.InputFields = append(t.InputFields, v)
		}
	case ast.Enum:
		for _, ev := range def.EnumValues {
			dep := ev.Directives.ForName("deprecated")
			dirs := directiveApplications(ev.Directives)
			if target, ok := aliasTarget(def, ev.Name, aliases); ok && dirs.Directive("enumValue") == nil {
				value := (&ast.Value{Kind: ast.StringValue, Raw: target}).String()
				dirs = append(dirs, &introspection.Directive{
					Name: "enumValue",
					Args: []*introspection.DirectiveArg{{Name: "value", Value: &value}},
				})
			}
			t.EnumValues = append(t.EnumValues, introspection.EnumValue{
				Name:              ev.Name,
				Description:       ev.Description,
				IsDeprecated:      dep != nil,
				DeprecationReason: deprecationReason(dep, nil),
				Directives:        dirs,
			})
		}
	}
	if def.Kind == ast.Object {
		for _, name := range def.Interfaces {
			idef, ok := schema.Types[name]
			if !ok {
				return nil, fmt.Errorf("%s: unknown interface %q", def.Name, name)
			}
			t.Interfaces = append(t.Interfaces, &introspection.Type{
				Kind: introspection.TypeKind(idef.Kind),
				Name: idef.Name,
			})
		}
	}
	return t, nil
}

// aliasTarget returns the member name is an alias of, when enum def declares
// both.
func aliasTarget(def *ast.Definition, name string, aliases []enumAlias) (string, bool) {
	for _, a := range aliases {
		if a.Alias == name && def.EnumValues.ForName(a.Target) != nil {
			return a.Target, true
		}
	}
	return "", false
}

func convertField(schema *ast.Schema, f *ast.FieldDefinition) (*introspection.Field, error) {
	ref, err := typeRef(schema, f.Type)
	if err != nil {
		return nil, err
	}
	dep := f.Directives.ForName("deprecated")
	noReason := "No longer supported"
	field := &introspection.Field{
		Name:              f.Name,
		Description:       f.Description,
		TypeRef:           ref,
		Args:              introspection.InputValues{},
		IsDeprecated:      dep != nil,
		DeprecationReason: deprecationReason(dep, &noReason),
		Directives:        directiveApplications(f.Directives),
	}
	for _, arg := range f.Arguments {
		if arg.Directives.ForName("internal") != nil {
			continue
		}
		v, err := convertInputValue(schema, arg.Name, arg.Description, arg.Type, arg.DefaultValue, arg.Directives)
		if err != nil {
			return nil, fmt.Errorf("argument %s: %w", arg.Name, err)
		}
		field.Args = append(field.Args, v)
	}
	return field, nil
}

func convertInputValue(schema *ast.Schema, name, description string, typ *ast.Type, def *ast.Value, dirs ast.DirectiveList) (introspection.InputValue, error) {
	ref, err := typeRef(schema, typ)
	if err != nil {
		return introspection.InputValue{}, err
	}
	dep := dirs.ForName("deprecated")
	v := introspection.InputValue{
		Name:              name,
		Description:       description,
		TypeRef:           ref,
		Directives:        directiveApplications(dirs),
		IsDeprecated:      dep != nil,
		DeprecationReason: deprecationReason(dep, nil),
	}
	if def != nil {
		s := def.String()
		v.DefaultValue = &s
	}
	return v, nil
}

// typeRef renders a type reference the way introspection nests it:
// NON_NULL and LIST wrappers around a named type.
func typeRef(schema *ast.Schema, typ *ast.Type) (*introspection.TypeRef, error) {
	if typ == nil {
		return nil, nil
	}
	if typ.NonNull {
		inner := *typ
		inner.NonNull = false
		of, err := typeRef(schema, &inner)
		if err != nil {
			return nil, err
		}
		return &introspection.TypeRef{Kind: introspection.TypeKindNonNull, OfType: of}, nil
	}
	if typ.Elem != nil {
		of, err := typeRef(schema, typ.Elem)
		if err != nil {
			return nil, err
		}
		return &introspection.TypeRef{Kind: introspection.TypeKindList, OfType: of}, nil
	}
	def, ok := schema.Types[typ.NamedType]
	if !ok {
		return nil, fmt.Errorf("unknown type %q", typ.NamedType)
	}
	return &introspection.TypeRef{Kind: introspection.TypeKind(def.Kind), Name: def.Name}, nil
}

func deprecationReason(dep *ast.Directive, fallback *string) *string {
	if dep == nil {
		return nil
	}
	if reason := dep.Arguments.ForName("reason"); reason != nil && reason.Value != nil {
		raw := reason.Value.Raw
		return &raw
	}
	return fallback
}

func directiveApplications(dirs ast.DirectiveList) introspection.Directives {
	out := introspection.Directives{}
	for _, d := range dirs {
		app := &introspection.Directive{Name: d.Name, Args: []*introspection.DirectiveArg{}}
		for _, a := range d.Arguments {
			arg := &introspection.DirectiveArg{Name: a.Name}
			if a.Value != nil {
				s := a.Value.String()
				arg.Value = &s
			}
			app.Args = append(app.Args, arg)
		}
		out = append(out, app)
	}
	return out
}
