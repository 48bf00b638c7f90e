package agent

import (
	"context"
	"testing"

	"github.com/patina-dev/patina/sidecar/mux"
)

// The real fixture's client talks to its agent over pipes: the agent holds
// pipes for it, and exec works through them.
func TestPipesUsed(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.client.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	f.client.mu.Lock()
	_, isPipe := f.client.conn.NetConn().(*mux.PipeConn)
	f.client.mu.Unlock()
	if !isPipe || f.client.noPipes.Load() {
		t.Fatalf("exp the connection on pipes, got pipe=%v noPipes=%v", isPipe, f.client.noPipes.Load())
	}
}

// An agent that does not take pipes (a plain mux server, as agents before
// them were) is spoken to on its socket, after one refused attempt.
func TestPipesOldAgent(t *testing.T) {
	c := fakeAgentPipes(t, func(st *mux.Stream) { st.Close() }, false)
	if _, err := c.Connect(context.Background()); err != nil {
		t.Fatalf("connect to an agent without pipes: %v", err)
	}
	if !c.noPipes.Load() {
		t.Fatal("exp the client to remember the agent takes no pipes")
	}
}
