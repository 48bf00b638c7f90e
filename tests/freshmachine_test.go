package tests

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestFreshMachineNeeds checks that what the test suite needs on a fresh
// Debian machine is named where a developer looks (README's test command)
// and installed by .ci/run: tmux (the attach tests drive a terminal through
// it and fail without it), gcc and libc6-dev (`go test -race` needs cgo),
// and Go 1.26 (go.mod), which Debian does not package, so .ci/run checks it.
func TestFreshMachineNeeds(t *testing.T) {
	readme := readRepoFile(t, "README.md")
	ci := readRepoFile(t, ".ci/run")

	// README's paragraph that introduces `go test -race -timeout NNm ./...`.
	i := strings.Index(readme, "Run the whole test suite")
	j := -1
	if loc := regexp.MustCompile(`go test -race -timeout \d+m \./\.\.\.`).FindStringIndex(readme); loc != nil {
		j = loc[0]
	}
	if i < 0 || j < i {
		t.Fatal("README: no paragraph \"Run the whole test suite\" before its test command")
	}
	para := readme[i:j]
	for _, want := range []string{"Go 1.26", "gcc", "libc6-dev", "tmux", "`-race`"} {
		if !strings.Contains(para, want) {
			t.Errorf("README's test command does not name %s", want)
		}
	}

	m := regexp.MustCompile(`(?s)\npkgs=\(([^)]*)\)`).FindStringSubmatch(ci)
	if m == nil {
		t.Fatal(".ci/run: no pkgs=(...) list")
	}
	pkgs := strings.Fields(m[1])
	for _, want := range []string{"gcc", "libc6-dev", "tmux", "git", "debootstrap", "docker.io"} {
		found := false
		for _, p := range pkgs {
			found = found || p == want
		}
		if !found {
			t.Errorf(".ci/run does not install %s (its list: %v)", want, pkgs)
		}
	}
	if !strings.Contains(ci, "go env GOVERSION") || !strings.Contains(ci, "Go 1.26 or later") {
		t.Error(".ci/run does not check for Go 1.26 before it starts")
	}
	if gomod := readRepoFile(t, "go.mod"); !strings.Contains(gomod, "\ngo 1.26") {
		t.Error("go.mod no longer says go 1.26: update README and .ci/run with it")
	}
}

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
