package template

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseDevcontainer(t *testing.T) {
	cfg, err := ParseDevcontainer(".devcontainer/devcontainer.json", []byte(`{
  // a comment, "with quotes"
  "name": "x", /* block */
  "build": {"dockerfile": "Dockerfile", "context": "..", "args": {"A": "1",}, "target": "dev"},
  "containerEnv": {"K": "v", "URL": "http://x//y"},
  "remoteEnv": {"K": "remote", "P": "${containerWorkspaceFolder}/bin", "GONE": null},
  "workspaceFolder": "/workspaces/x/",
  "onCreateCommand": "make deps",
  "updateContentCommand": ["echo", "it's"],
  "postCreateCommand": {"b": "echo b", "a": ["touch", "/tmp/a b"]},
  "forwardPorts": [3000, 8080],
  "customizations": {},
}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Devcontainer{
		Dockerfile: ".devcontainer/Dockerfile", Context: "", Args: map[string]string{"A": "1"}, Target: "dev",
		Env:             map[string]string{"K": "remote", "URL": "http://x//y", "P": "/workspace/bin"},
		WorkspaceFolder: "/workspaces/x",
		Commands:        []string{"make deps", `echo 'it'\''s'`, "touch '/tmp/a b'", "echo b"},
		ForwardPorts:    []int{3000, 8080},
		Ignored:         []string{"customizations"},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("exp %+v\ngot %+v", want, cfg)
	}
}

func TestParseDevcontainerRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ json, want string }{
		"syntax":      {`{"image": }`, "devcontainer.json"},
		"neither":     {`{"name": "x"}`, "neither an image nor a build.dockerfile"},
		"compose":     {`{"dockerComposeFile": "a.yml"}`, "Compose"},
		"features":    {`{"image": "a", "features": {}}`, "features"},
		"escape":      {`{"build": {"dockerfile": "../../x"}}`, "leaves the repository"},
		"ctxescape":   {`{"build": {"dockerfile": "D", "context": "../.."}}`, "leaves the repository"},
		"absolute":    {`{"build": {"dockerfile": "/etc/passwd"}}`, "relative"},
		"folder":      {`{"image": "a", "workspaceFolder": "relative"}`, "workspaceFolder"},
		"folderroot":  {`{"image": "a", "workspaceFolder": "/"}`, "workspaceFolder"},
		"folderpatin": {`{"image": "a", "workspaceFolder": "/.patina/bin"}`, "workspaceFolder"},
		"folderquote": {`{"image": "a", "workspaceFolder": "/a'b"}`, "workspaceFolder"},
		"envname":     {`{"image": "a", "containerEnv": {"A B": "x"}}`, "environment variable"},
		"port":        {`{"image": "a", "forwardPorts": ["db:5432"]}`, "forwardPorts"},
		"port0":       {`{"image": "a", "forwardPorts": [0]}`, "forwardPorts"},
		"command":     {`{"image": "a", "postCreateCommand": 5}`, "postCreateCommand"},
		"nested":      {`{"image": "a", "postCreateCommand": {"x": {"y": "z"}}}`, "postCreateCommand"},
		"nul":         {`{"image": "a", "postCreateCommand": "a\u0000b"}`, "NUL"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseDevcontainer(".devcontainer/devcontainer.json", []byte(tc.json))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("exp an ErrInvalid saying %q, got %v", tc.want, err)
			}
		})
	}
	if _, err := ParseDevcontainer(".devcontainer.json", make([]byte, MaxConfigBytes+1)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a config over the bound: %v", err)
	}
}

func TestStripJSONC(t *testing.T) {
	for in, exp := range map[string]string{
		`{"a": "// not a comment", "b": "/* nor this */"}`: `{"a": "// not a comment", "b": "/* nor this */"}`,
		"{\"a\": 1, // c\n}": "{\"a\": 1 \n}",
		`{"a": [1, 2, ], }`:  `{"a": [1, 2 ] }`,
		`{"a": "\"//\""}`:    `{"a": "\"//\""}`,
		`{"a": 1 /* x */}`:   `{"a": 1  }`,
	} {
		if got := string(stripJSONC([]byte(in))); got != exp {
			t.Errorf("%q: exp %q, got %q", in, exp, got)
		}
	}
}

func FuzzParseDevcontainer(f *testing.F) {
	for _, s := range []string{`{"image": "a"}`, `{"build": {"dockerfile": "D", "context": ".."}}`, "{\"a\": 1, // c\n}", `{"postCreateCommand": {"a": ["x", "y"]}, "image": "i"}`, `/*`, `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := ParseDevcontainer(".devcontainer/devcontainer.json", []byte(s))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("an error that is not ErrInvalid: %v", err)
			}
			return
		}
		for _, p := range []string{cfg.Dockerfile, cfg.Context} {
			if strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") {
				t.Fatalf("a path outside the repository: %q", p)
			}
		}
		if cfg.Image == "" && cfg.Dockerfile == "" {
			t.Fatal("neither image nor Dockerfile")
		}
	})
}
