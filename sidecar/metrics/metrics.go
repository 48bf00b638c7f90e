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

	"github.com/patina-dev/patina/sidecar/workspace"
)

// Source lists the workspaces (workspace.Manager does).
type Source interface {
	List() []workspace.Info
}

// Extras are figures a sidecar has when it has a warm pool or templates;
// each is read at every scrape (nil: none).
type Extras struct {
	// Pool reports the warm pool: the workspaces it keeps, those ready
	// now and being made, and how many were taken since start.
	Pool func() (size, ready, filling int, taken int64)
	// Templates counts the templates there are now.
	Templates func() int
}

// Metrics is the sidecar's registry.
type Metrics struct {
	reg      *prometheus.Registry
	execs    *prometheus.CounterVec
	latency  prometheus.Histogram
	errors   *prometheus.CounterVec
	streamed *prometheus.CounterVec
}

// New makes the registry; src and the extras are read at each scrape.
func New(src Source, extras Extras) *Metrics {
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
	m.reg.MustRegister(m.execs, m.latency, m.errors, m.streamed, &scrape{src: src, extras: extras})
	return m
}

// scrapeTimeout bounds the gathering of one scrape.
const scrapeTimeout = 10 * time.Second

// Handler serves the registry in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{MaxRequestsInFlight: 4, Timeout: scrapeTimeout})
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
type scrape struct {
	src    Source
	extras Extras
}

var (
	descWorkspaces = prometheus.NewDesc("patina_workspaces", "Workspaces by state (running, stopped, idle_stopped, adopting).", []string{"state"}, nil)
	descRestarts   = prometheus.NewDesc("patina_agent_restarts", "Agent restarts summed over the workspaces that exist now.", nil, nil)
	descForwards   = prometheus.NewDesc("patina_forwards_open", "Forwarded ports open now.", nil, nil)
	descFwdConns   = prometheus.NewDesc("patina_forward_connections", "Connections open through forwarded ports now.", nil, nil)
	descMemory     = prometheus.NewDesc("patina_sidecar_memory_bytes", "Memory the sidecar's Go runtime holds from the OS (runtime/metrics /memory/classes/total:bytes).", nil, nil)
	descHeap       = prometheus.NewDesc("patina_sidecar_heap_bytes", "Bytes of live and unswept heap objects in the sidecar.", nil, nil)
	descPoolSize   = prometheus.NewDesc("patina_pool_size", "Workspaces the warm pool keeps ready (serve --warm).", nil, nil)
	descPoolReady  = prometheus.NewDesc("patina_pool_ready", "Workspaces ready in the warm pool now.", nil, nil)
	descPoolFill   = prometheus.NewDesc("patina_pool_filling", "Workspaces being made for the warm pool now.", nil, nil)
	descPoolTaken  = prometheus.NewDesc("patina_pool_taken_total", "Creates served from the warm pool since the sidecar started.", nil, nil)
	descTemplates  = prometheus.NewDesc("patina_templates", "Templates kept now (built from devcontainer.json or a Dockerfile, or saved from a workspace).", nil, nil)
)

func (s *scrape) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descWorkspaces, descRestarts, descForwards, descFwdConns, descMemory, descHeap} {
		ch <- d
	}
	if s.extras.Pool != nil {
		for _, d := range []*prometheus.Desc{descPoolSize, descPoolReady, descPoolFill, descPoolTaken} {
			ch <- d
		}
	}
	if s.extras.Templates != nil {
		ch <- descTemplates
	}
}

// State names a workspace's state as the console and metrics show it: an
// idle-stopped workspace apart from one stopped by hand.
func State(w workspace.Info) string {
	if w.Status == workspace.StatusStopped && w.IdleStopped {
		return "idle_stopped"
	}
	return string(w.Status)
}

func (s *scrape) Collect(ch chan<- prometheus.Metric) {
	states := map[string]int{string(workspace.StatusRunning): 0, string(workspace.StatusStopped): 0, "idle_stopped": 0, string(workspace.StatusAdopting): 0}
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
	if s.extras.Pool != nil {
		size, ready, filling, taken := s.extras.Pool()
		ch <- prometheus.MustNewConstMetric(descPoolSize, prometheus.GaugeValue, float64(size))
		ch <- prometheus.MustNewConstMetric(descPoolReady, prometheus.GaugeValue, float64(ready))
		ch <- prometheus.MustNewConstMetric(descPoolFill, prometheus.GaugeValue, float64(filling))
		ch <- prometheus.MustNewConstMetric(descPoolTaken, prometheus.CounterValue, float64(taken))
	}
	if s.extras.Templates != nil {
		ch <- prometheus.MustNewConstMetric(descTemplates, prometheus.GaugeValue, float64(s.extras.Templates()))
	}
}
