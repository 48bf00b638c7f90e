package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/network"

	"github.com/patina-dev/patina/sidecar/client"
)

// TestSidecarsStartAtOnce starts several sidecars at the same moment on a
// fresh Docker engine (no network, no volume, nothing of patina's), as the
// test packages of `dagger call test --integration` did when 43 tests failed
// with "network patina is ambiguous (2 matches found on name)": each makes
// a workspace and runs a command in it at once. Every one must work, and
// the engine must be left with no two networks of one name.
func TestSidecarsStartAtOnce(t *testing.T) {
	e := StartSecondEngine(t)
	const n = 3
	t.Run("together", func(t *testing.T) {
		for i := range n {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				h := StartWithEnv(t, []string{"DOCKER_HOST=" + e.Host})
				name := fmt.Sprintf("at-once-%d", i)
				h.CreateWorkspace(client.CreateWorkspaceRequest{Name: name})
				if got := h.Out(name, "default", "echo ok"); got != "ok\n" {
					t.Fatalf("exec: exp ok, got %q", got)
				}
				noDuplicateNetworks(t, e) // while the sidecars run
			})
		}
	})
	noDuplicateNetworks(t, e)
}

// noDuplicateNetworks fails t if two networks of e share a name, or if one
// is the shared "patina" network of older versions.
func noDuplicateNetworks(t *testing.T, e *SecondEngine) {
	t.Helper()
	list, err := e.Client(t).NetworkList(context.Background(), network.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	var names []string
	for _, nw := range list {
		seen[nw.Name]++
		names = append(names, nw.Name)
	}
	for name, c := range seen {
		if c > 1 {
			t.Errorf("%d networks named %s on the engine: %v", c, name, names)
		}
	}
	if seen["patina"] != 0 {
		t.Errorf("a shared network named patina was made: %v", names)
	}
	t.Logf("networks on the engine: %s", strings.Join(names, " "))
}
