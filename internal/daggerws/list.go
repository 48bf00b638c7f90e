package daggerws

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/patina-dev/patina/sidecar/client"
)

// List formats.
const (
	FormatTable = "table"
	FormatJSON  = "json"
)

// ListRequest is what List needs.
type ListRequest struct {
	// Format is FormatTable (the default when empty) or FormatJSON.
	Format string
}

// Validate checks a request without calling the sidecar.
func (r ListRequest) Validate() error {
	switch r.Format {
	case "", FormatTable, FormatJSON:
		return nil
	}
	return invalidf("format %q: want %q or %q", r.Format, FormatTable, FormatJSON)
}

// List lists the sidecar's workspaces: a table, oldest first, or in
// FormatJSON the sidecar's JSON array (indented; [] when there are none).
func List(ctx context.Context, c API, req ListRequest) (string, error) {
	if err := req.Validate(); err != nil {
		return "", err
	}
	wss, err := c.ListWorkspaces(ctx)
	if err != nil {
		return "", explain(c, "list workspaces", "", err)
	}
	if req.Format == FormatJSON {
		if wss == nil {
			wss = []client.Workspace{}
		}
		b, err := json.MarshalIndent(wss, "", "  ")
		if err != nil {
			return "", err
		}
		return string(b) + "\n", nil
	}
	return table(wss), nil
}

// table is List's text answer.
func table(wss []client.Workspace) string {
	if len(wss) == 0 {
		return "no workspaces\n"
	}
	wss = append([]client.Workspace(nil), wss...)
	sort.SliceStable(wss, func(i, j int) bool { return wss[i].CreatedAt.Before(wss[j].CreatedAt) })
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tBRANCH\tREPO\tCREATED")
	for _, w := range wss {
		status := w.Status
		if w.Error != "" {
			status += " (" + oneLine(w.Error, 60) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cell(w.Name), cell(status), cell(w.Branch), cell(w.Repo),
			w.CreatedAt.UTC().Format(time.RFC3339))
	}
	tw.Flush()
	return b.String()
}

// cell is a table cell: one line, no tabs, "-" when empty.
func cell(s string) string {
	s = oneLine(s, 200)
	if s == "" {
		return "-"
	}
	return s
}
