// Package metrics keeps the sidecar's figures for operators and serves them
// in Prometheus' text format (github.com/prometheus/client_golang). Every
// name starts with patina_. Counters are counted as things happen (execs,
// their latency and errors, bytes streamed); figures about workspaces are
// read from the domain when scraped, through the Source interface.
package metrics

import (
	"net/http"
	"runtime/metrics"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/patina-dev/patina/sidecar/client"
)

// Source lists the workspaces (workspace.Manager does).
type Source interface {
	List() []client.Workspace
}

// Metrics is the sidecar's registry.
type Metrics struct {
	reg      *prometheus.Registry
	execs    *prometheus.CounterVec
	latency  prometheus.Histogram
	errors   *prometheus.CounterVec
	streamed *prometheus.CounterVec
}

// New makes the registry; src is read at each scrape.
func New(src Source) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		execs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "patina_execs_total", Help: "Commands run through the API, by outcome (ok, error).",
		}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "patina_exec_duration_seconds", Help: "Time from an exec request to its result (commands that finished).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "patina_exec_errors_total", Help: "Exec requests that failed, by the API's error code (busy, ended, not_found …).",
		}, []string{"code"}),
		streamed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "patina_streamed_bytes_total", Help: "Bytes of command output and terminal output sent to clients, by kind (output, terminal).",
		}, []string{"kind"}),
	}
	m.reg.MustRegister(m.execs, m.latency, m.errors, m.streamed, &scrape{src: src})
	return m
}

// Handler serves the registry in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{MaxRequestsInFlight: 4, Timeout: 10 * time.Second})
}

// Registry is the registry (for tests and other collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Exec records an exec that ended with an error code ("" for success) and
// took d.
func (m *Metrics) Exec(code string, d time.Duration) {
	if code == "" {
		m.execs.WithLabelValues("ok").Inc()
		m.latency.Observe(d.Seconds())
		return
	}
	m.execs.WithLabelValues("error").Inc()
	m.errors.WithLabelValues(code).Inc()
}

// Streamed records n bytes sent to a client (kind "output" or "terminal").
func (m *Metrics) Streamed(kind string, n int) {
	if n > 0 {
		m.streamed.WithLabelValues(kind).Add(float64(n))
	}
}

// scrape reads the workspaces' figures and the sidecar's memory when
// scraped.
type scrape struct{ src Source }

var (
	descWorkspaces = prometheus.NewDesc("patina_workspaces", "Workspaces by state (running, stopped, idle_stopped, adopting).", []string{"state"}, nil)
	descRestarts   = prometheus.NewDesc("patina_agent_restarts", "Agent restarts summed over the workspaces that exist now.", nil, nil)
	descForwards   = prometheus.NewDesc("patina_forwards_open", "Forwarded ports open now.", nil, nil)
	descFwdConns   = prometheus.NewDesc("patina_forward_connections", "Connections open through forwarded ports now.", nil, nil)
	descMemory     = prometheus.NewDesc("patina_sidecar_memory_bytes", "Memory the sidecar's Go runtime holds from the OS (runtime/metrics /memory/classes/total:bytes).", nil, nil)
	descHeap       = prometheus.NewDesc("patina_sidecar_heap_bytes", "Bytes of live and unswept heap objects in the sidecar.", nil, nil)
)

func (s *scrape) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descWorkspaces, descRestarts, descForwards, descFwdConns, descMemory, descHeap} {
		ch <- d
	}
}

// State names a workspace's state as the console and metrics show it: an
// idle-stopped workspace apart from one stopped by hand.
func State(w client.Workspace) string {
	if w.Status == client.StatusStopped && w.IdleStopped {
		return "idle_stopped"
	}
	return w.Status
}

func (s *scrape) Collect(ch chan<- prometheus.Metric) {
	states := map[string]int{client.StatusRunning: 0, client.StatusStopped: 0, "idle_stopped": 0, client.StatusAdopting: 0}
	restarts, forwards, conns := 0, 0, 0
	for _, w := range s.src.List() {
		states[State(w)]++
		if w.Agent != nil {
			restarts += w.Agent.Restarts
		}
		forwards += len(w.Ports)
		for _, p := range w.Ports {
			conns += p.Connections
		}
	}
	for st, n := range states {
		ch <- prometheus.MustNewConstMetric(descWorkspaces, prometheus.GaugeValue, float64(n), st)
	}
	ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.GaugeValue, float64(restarts))
	ch <- prometheus.MustNewConstMetric(descForwards, prometheus.GaugeValue, float64(forwards))
	ch <- prometheus.MustNewConstMetric(descFwdConns, prometheus.GaugeValue, float64(conns))
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	ch <- prometheus.MustNewConstMetric(descMemory, prometheus.GaugeValue, float64(sample[0].Value.Uint64()))
	ch <- prometheus.MustNewConstMetric(descHeap, prometheus.GaugeValue, float64(sample[1].Value.Uint64()))
}
