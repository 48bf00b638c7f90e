package metrics

import (
	"testing"

	"github.com/patina-dev/patina/sidecar/workspace"
)

type workspaces []workspace.Info

func (w workspaces) List() []workspace.Info { return w }

// gathered is every gauge or counter the registry gathers, by name (the
// first series of each).
func gathered(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			switch {
			case s.GetGauge() != nil:
				out[mf.GetName()] = s.GetGauge().GetValue()
			case s.GetCounter() != nil:
				out[mf.GetName()] = s.GetCounter().GetValue()
			}
			break
		}
	}
	return out
}

// The warm pool's and the templates' figures are there when the sidecar
// has them, and absent when it has not.
func TestPoolAndTemplateFigures(t *testing.T) {
	src := workspaces{{Status: workspace.StatusRunning}}
	got := gathered(t, New(src, Extras{}))
	for _, name := range []string{"patina_pool_ready", "patina_templates"} {
		if _, ok := got[name]; ok {
			t.Fatalf("%s without a pool or templates", name)
		}
	}
	m := New(src, Extras{
		Pool:      func() (int, int, int, int64) { return 4, 3, 1, 17 },
		Templates: func() int { return 2 },
	})
	got = gathered(t, m)
	exp := map[string]float64{"patina_pool_size": 4, "patina_pool_ready": 3, "patina_pool_filling": 1, "patina_pool_taken_total": 17, "patina_templates": 2}
	for name, v := range exp {
		if got[name] != v {
			t.Fatalf("%s: exp %v, got %v (%v)", name, v, got[name], got)
		}
	}
}
