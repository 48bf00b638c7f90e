package sidecar

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/template"
	"github.com/patina-dev/patina/sidecar/workspace"
)

// POST /v1/templates answers with the template as JSON; with ?progress=1,
// once the build has output, as NDJSON: {"progress": "..."} lines, then
// {"template": {...}} or {"error": "...", "code": "..."}. An error before
// any output is an ordinary error answer (4xx for a bad devcontainer.json).
func (s *Service) handleBuildTemplate(w http.ResponseWriter, r *http.Request) {
	var req client.BuildTemplateRequest
	if err := decode(w, r, &req, s.cfg.MaxBodyBytes, false); err != nil {
		writeError(w, err)
		return
	}
	var pw *progressWriter
	var out io.Writer = io.Discard // not streamed: dropped
	if r.URL.Query().Get("progress") == "1" {
		pw = &progressWriter{w: w}
		out = pw
	}
	t, err := s.mgr.BuildTemplate(r.Context(), buildTemplateRequest(req), out)
	if pw != nil && pw.started() {
		if err != nil {
			_, c := status(err)
			pw.line(client.TemplateProgress{Error: err.Error(), Code: c})
			return
		}
		v := templateView(t)
		pw.line(client.TemplateProgress{Template: &v})
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	code := http.StatusOK
	if t.Built {
		code = http.StatusCreated
	}
	writeJSON(w, code, templateView(t))
}

func (s *Service) handleListTemplates(w http.ResponseWriter, r *http.Request) {
	out := client.TemplateList{Templates: []client.Template{}}
	if s.tpl != nil {
		list, err := s.tpl.List(r.Context())
		if err != nil {
			writeError(w, err)
			return
		}
		for _, t := range list {
			out.Templates = append(out.Templates, templateView(t))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Service) handleGetTemplate(w http.ResponseWriter, r *http.Request) {
	if s.tpl == nil {
		writeError(w, fmt.Errorf("%w: this sidecar makes no templates", workspace.ErrUnsupported))
		return
	}
	t, err := s.tpl.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, templateView(t))
}

func (s *Service) handleDeleteTemplate(w http.ResponseWriter, r *http.Request) {
	if s.tpl == nil {
		writeError(w, fmt.Errorf("%w: this sidecar makes no templates", workspace.ErrUnsupported))
		return
	}
	// A workspace of it refuses the removal before its pool is touched
	// (Docker's refusal would come after the pool's workspaces were gone).
	if users := s.mgr.TemplateUsers(r.PathValue("name")); len(users) > 0 {
		writeError(w, fmt.Errorf("%w: template %s: workspace %s uses it; delete it first", template.ErrInUse, r.PathValue("name"), strings.Join(users, ", ")))
		return
	}
	// Its pooled workspaces first (their containers hold its image).
	done := s.mgr.ReleaseTemplate(r.Context(), r.PathValue("name"))
	defer done()
	if err := s.tpl.Remove(r.Context(), r.PathValue("name")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func templateView(t template.Template) client.Template {
	return client.Template{
		Name: t.Name, Hash: t.Hash, Image: t.Ref, ImageID: t.ImageID, Repo: t.Repo, Source: t.Source,
		Env: t.Env, WorkspaceFolder: t.WorkspaceFolder, ForwardPorts: t.ForwardPorts, Ignored: t.Ignored,
		Snapshot: t.Snapshot, SizeBytes: t.Size, CreatedAt: t.CreatedAt, Built: t.Built,
	}
}

// POST /v1/workspaces/{id}/snapshot answers 201 with the template.
func (s *Service) handleSnapshotWorkspace(w http.ResponseWriter, r *http.Request) {
	var req client.SnapshotWorkspaceRequest
	if err := decode(w, r, &req, s.cfg.MaxBodyBytes, false); err != nil {
		writeError(w, err)
		return
	}
	t, err := s.mgr.Snapshot(r.Context(), r.PathValue("id"), snapshotRequest(req))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, templateView(t))
}

// progressWriter streams a build's output as NDJSON lines, starting the
// answer (200) at its first write.
type progressWriter struct {
	mu sync.Mutex
	w  http.ResponseWriter
	on bool
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.line(client.TemplateProgress{Progress: string(b)})
	return len(b), nil
}

func (p *progressWriter) started() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.on
}

func (p *progressWriter) line(v client.TemplateProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		p.w.Header().Set("Content-Type", "application/x-ndjson")
		p.w.WriteHeader(http.StatusOK)
		p.on = true
	}
	b, _ := json.Marshal(v)
	_, _ = p.w.Write(append(b, '\n'))
	if f, ok := p.w.(http.Flusher); ok {
		f.Flush()
	}
}
