package pipeline

import (
	"slices"
	"testing"
)

func TestTestSteps(t *testing.T) {
	short := TestRequest{}.Steps()
	if len(short) != 2 || short[0].Name != "go vet" || short[1].Name != "go test" {
		t.Fatalf("exp go vet then go test, got %+v", short)
	}
	if exp := []string{"go", "vet", "./..."}; !slices.Equal(exp, short[0].Args) {
		t.Errorf("vet: exp %q, got %q", exp, short[0].Args)
	}
	if exp := []string{"go", "test", "-race", "-short", "-timeout", ShortTimeout, "./..."}; !slices.Equal(exp, short[1].Args) {
		t.Errorf("test: exp %q, got %q", exp, short[1].Args)
	}
	if short[1].Privileged {
		t.Error("short tests must not be privileged")
	}
	if env := (TestRequest{}).Env(); env != nil {
		t.Errorf("short env: exp none, got %v", env)
	}

	integ := TestRequest{Integration: true}.Steps()
	if exp := []string{"go", "test", "-race", "-count=1", "-timeout", IntegrationTimeout, "./..."}; !slices.Equal(exp, integ[1].Args) {
		t.Errorf("integration test: exp %q, got %q", exp, integ[1].Args)
	}
	if !integ[1].Privileged {
		t.Error("integration tests run debootstrap: exp privileged")
	}
	exp := []EnvVar{{"DOCKER_HOST", "tcp://docker:2375"}, {"TMPDIR", "/patina-tmp"}}
	if got := (TestRequest{Integration: true}).Env(); !slices.Equal(exp, got) {
		t.Errorf("integration env: exp %v, got %v", exp, got)
	}
	if args := DockerdArgs(); !slices.Contains(args, "--host=tcp://0.0.0.0:2375") || !slices.Contains(args, "--tls=false") {
		t.Errorf("dockerd must listen on plain TCP 2375, got %q", args)
	}
}
