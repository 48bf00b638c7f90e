package daggerws

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/tests"
)

// startSidecar starts a real `patina serve` (skipped under -short, a
// failure without Docker) and returns a client made by Connect, with the
// token as a secret read from the sidecar's token file would hold it.
func startSidecar(t *testing.T) (*tests.Harness, *client.Client) {
	t.Helper()
	h := tests.Start(t)
	c, err := Connect(h.Client.Addr(), h.Token+"\n")
	if err != nil {
		t.Fatalf("Connect(%q): %v", h.Client.Addr(), err)
	}
	return h, c
}

// testContext is a context for one call to the sidecar.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// must returns a function that fails the test when err is not nil and
// returns out: must(t, "List")(List(ctx, c, ListRequest{})).
func must(t *testing.T, what string) func(out string, err error) string {
	t.Helper()
	return func(out string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return out
	}
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }

func errorsIs(err, target error) bool { return errors.Is(err, target) }
