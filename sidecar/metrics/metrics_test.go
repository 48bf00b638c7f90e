package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/patina-dev/patina/sidecar/client"
)

type list []client.Workspace

func (l list) List() []client.Workspace { return l }

func TestScrape(t *testing.T) {
	src := list{
		{Status: client.StatusRunning, Agent: &client.AgentStatus{Restarts: 2}, Ports: []client.PortForward{{Port: 1, Connections: 3}}},
		{Status: client.StatusStopped, IdleStopped: true},
		{Status: client.StatusStopped},
	}
	m := New(src)
	m.Exec("", 3*time.Millisecond)
	m.Exec("busy", time.Millisecond)
	m.Streamed("terminal", 10)
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(w.Body.String()))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, w.Body)
	}
	for name := range fams {
		if !strings.HasPrefix(name, "patina_") {
			t.Errorf("%s is not prefixed patina_", name)
		}
	}
	states := map[string]float64{}
	for _, mm := range fams["patina_workspaces"].Metric {
		states[mm.Label[0].GetValue()] = mm.Gauge.GetValue()
	}
	for st, exp := range map[string]float64{"running": 1, "stopped": 1, "idle_stopped": 1, "adopting": 0} {
		if states[st] != exp {
			t.Errorf("workspaces %s: exp %v, got %v", st, exp, states[st])
		}
	}
	for name, exp := range map[string]float64{"patina_agent_restarts": 2, "patina_forwards_open": 1, "patina_forward_connections": 3} {
		if got := fams[name].Metric[0].Gauge.GetValue(); got != exp {
			t.Errorf("%s: exp %v, got %v", name, exp, got)
		}
	}
	if got := fams["patina_exec_duration_seconds"].Metric[0].Histogram.GetSampleCount(); got != 1 {
		t.Errorf("latency samples: exp 1 (errors are not timed), got %d", got)
	}
	if got := fams["patina_exec_errors_total"].Metric[0].Counter.GetValue(); got != 1 {
		t.Errorf("errors: exp 1, got %v", got)
	}
	if got := fams["patina_streamed_bytes_total"].Metric[0].Counter.GetValue(); got != 10 {
		t.Errorf("streamed: exp 10, got %v", got)
	}
}
