package pipeline

import (
	"slices"
	"strings"
	"testing"
)

func TestParsePlatform(t *testing.T) {
	for _, tc := range []struct {
		in  string
		exp Target
		env []EnvVar
		err bool
	}{
		{in: "linux/amd64", exp: Target{GOOS: "linux", GOARCH: "amd64"},
			env: []EnvVar{{"GOOS", "linux"}, {"GOARCH", "amd64"}}},
		{in: "linux/arm64", exp: Target{GOOS: "linux", GOARCH: "arm64"}},
		{in: "linux/arm64/v8", exp: Target{GOOS: "linux", GOARCH: "arm64", Variant: "v8"},
			env: []EnvVar{{"GOOS", "linux"}, {"GOARCH", "arm64"}}},
		{in: "linux/arm/v7", exp: Target{GOOS: "linux", GOARCH: "arm", Variant: "v7"},
			env: []EnvVar{{"GOOS", "linux"}, {"GOARCH", "arm"}, {"GOARM", "7"}}},
		{in: "linux/amd64/v3", exp: Target{GOOS: "linux", GOARCH: "amd64", Variant: "v3"},
			env: []EnvVar{{"GOOS", "linux"}, {"GOARCH", "amd64"}, {"GOAMD64", "v3"}}},
		{in: "darwin/arm64", exp: Target{GOOS: "darwin", GOARCH: "arm64"}},
		{in: "", err: true},
		{in: "linux", err: true},
		{in: "linux/", err: true},
		{in: "linux/amd64/v3/x", err: true},
		{in: "Linux/amd64", err: true},
		{in: "linux/arm/v9", err: true},
		{in: "linux/amd64/v5", err: true},
		{in: "linux/arm64/v9", err: true},
		{in: "linux/riscv64/v1", err: true},
		{in: "linux/amd64 -o /x", err: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParsePlatform(tc.in)
			if tc.err {
				if err == nil {
					t.Fatalf("exp an error, got %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.exp {
				t.Errorf("exp %+v, got %+v", tc.exp, got)
			}
			if tc.env != nil && !slices.Equal(tc.env, got.Env()) {
				t.Errorf("env: exp %v, got %v", tc.env, got.Env())
			}
		})
	}
}

func TestValidateVersion(t *testing.T) {
	for _, ok := range []string{"dev", "v1.2.3", "1.2.3-rc.1+build.5", "0.0.0_x", strings.Repeat("9", 128)} {
		if err := ValidateVersion(ok); err != nil {
			t.Errorf("%q: exp ok, got %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-v1", ".1", "1 2", `1"`, "1'", "a/b", "v1\n", strings.Repeat("9", 129), "é"} {
		if err := ValidateVersion(bad); err == nil {
			t.Errorf("%q: exp an error, got nil", bad)
		}
	}
}

func TestBuildCommand(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  BuildRequest
		exp  []string
	}{
		{"default version", BuildRequest{},
			[]string{"go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w -X main.version=dev", "-o", "/out/patina", "./sidecar/cmd/patina"}},
		{"given version", BuildRequest{Version: "v0.3.0", Platform: "linux/arm64"},
			[]string{"go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w -X main.version=v0.3.0", "-o", "/out/patina", "./sidecar/cmd/patina"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.req.Command()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(tc.exp, got) {
				t.Errorf("exp %q, got %q", tc.exp, got)
			}
		})
	}
	if _, err := (BuildRequest{Version: "1 2"}).Command(); err == nil {
		t.Error("bad version: exp an error, got nil")
	}
}

func TestBuildEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  BuildRequest
		exp  []EnvVar
	}{
		{"native", BuildRequest{}, []EnvVar{{"CGO_ENABLED", "0"}}},
		{"arm64", BuildRequest{Platform: "linux/arm64"},
			[]EnvVar{{"CGO_ENABLED", "0"}, {"GOARCH", "arm64"}, {"GOOS", "linux"}}},
		{"armv7", BuildRequest{Platform: "linux/arm/v7"},
			[]EnvVar{{"CGO_ENABLED", "0"}, {"GOARCH", "arm"}, {"GOARM", "7"}, {"GOOS", "linux"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.req.Env()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(tc.exp, got) {
				t.Errorf("exp %v, got %v", tc.exp, got)
			}
		})
	}
	if _, err := (BuildRequest{Platform: "plan9"}).Env(); err == nil {
		t.Error("bad platform: exp an error, got nil")
	}
}
