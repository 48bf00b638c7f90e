package inside

import (
	"testing"

	"github.com/patina-dev/patina/sidecar/agent/internal/agenttest"
	"github.com/patina-dev/patina/sidecar/agent/wire"
)

// A setup the agent cannot take is refused, changing nothing.
func TestSetupRefusesBadInput(t *testing.T) {
	for _, req := range []wire.SetupRequest{
		{Env: map[string]string{"1BAD": "x"}},
		{Env: map[string]string{"OK": "a\x00b"}},
		{Trust: &wire.TrustSetup{CA: "not a PEM", CAPath: "/tmp/x/ca.pem", BundlePath: "/tmp/x/b.pem"}},
		{Trust: &wire.TrustSetup{CA: agenttest.CAPEM(t), CAPath: "relative/ca.pem", BundlePath: "/tmp/x/b.pem"}},
		{Trust: &wire.TrustSetup{CA: agenttest.CAPEM(t), CAPath: "/tmp/x/../ca.pem", BundlePath: "/tmp/x/b.pem"}},
	} {
		if err := checkSetup(&req); err == nil {
			t.Errorf("exp %+v refused", req)
		}
	}
}
