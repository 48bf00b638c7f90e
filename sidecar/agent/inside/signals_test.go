package inside

import (
	"slices"
	"testing"

	"github.com/patina-dev/patina/sidecar/client"
)

// The agent sends exactly the signals the API lists.
func TestSignalsAreTheAPIs(t *testing.T) {
	var names []string
	for n := range signals {
		names = append(names, n)
	}
	slices.Sort(names)
	api := slices.Sorted(slices.Values(client.Signals))
	if !slices.Equal(names, api) {
		t.Fatalf("the agent's signals %v differ from the API's %v", names, api)
	}
}
