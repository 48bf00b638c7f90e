package sidecar

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/patina-dev/patina/sidecar/client"
	"github.com/patina-dev/patina/sidecar/openapi"
)

// apiCodes are the codes the API answers with (client.Code*).
var apiCodes = []string{
	client.CodeInvalid, client.CodeUnauthorized, client.CodeNotFound, client.CodeBusy, client.CodeEnded,
	client.CodeConflict, client.CodeStopped, client.CodeTooLarge, client.CodeMethodNotAllowed,
	client.CodeUnavailable, client.CodeInternal, client.CodeNotRunning, client.CodeNoRepository,
	client.CodeAgentUnavailable, client.CodeRejected, client.CodeAdopting, client.CodeNotListening,
}

func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Document)
	if err != nil {
		t.Fatalf("load openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("exp OpenAPI 3.1, got %q", doc.OpenAPI)
	}
	return doc
}

var wildcard = regexp.MustCompile(`\{([a-z_]+)(\.\.\.)?\}`)

// TestOpenAPIMatchesRouter fails when the router serves a route that the
// OpenAPI document does not describe, or the other way round: whoever adds
// (or removes) a route documents it in sidecar/openapi/openapi.json.
func TestOpenAPIMatchesRouter(t *testing.T) {
	doc := loadOpenAPI(t)
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	served := map[string]bool{}
	for _, p := range Routes() {
		served[wildcard.ReplaceAllString(p, "{$1}")] = true
	}
	var missing, extra []string
	for r := range served {
		if !documented[r] {
			missing = append(missing, r)
		}
	}
	for r := range documented {
		if !served[r] {
			extra = append(extra, r)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	if len(missing) > 0 {
		t.Errorf("routes the router serves that sidecar/openapi/openapi.json does not describe:\n  %s", strings.Join(missing, "\n  "))
	}
	if len(extra) > 0 {
		t.Errorf("routes sidecar/openapi/openapi.json describes that the router does not serve:\n  %s", strings.Join(extra, "\n  "))
	}
}

// TestOpenAPIDocumentsEveryCode checks that the error schema lists every
// code the API answers with.
func TestOpenAPIDocumentsEveryCode(t *testing.T) {
	doc := loadOpenAPI(t)
	codes := map[string]bool{}
	for _, v := range doc.Components.Schemas["Error"].Value.Properties["code"].Value.Enum {
		codes[v.(string)] = true
	}
	for _, c := range apiCodes {
		if !codes[c] {
			t.Errorf("code %q is not in the Error schema's enum", c)
		}
	}
}

// TestOpenAPIServed: the document is served without a token, as it is.
func TestOpenAPIServed(t *testing.T) {
	s := &Service{token: "secret"}
	srv := httptest.NewServer(s.routes())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("exp 200 application/json, got %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	doc, err := openapi3.NewLoader().LoadFromIoReader(resp.Body)
	if err != nil || doc.Info.Title == "" {
		t.Fatalf("exp the document, got %v", err)
	}
	// Every other /v1 path still needs the token.
	resp2, err := http.Get(srv.URL + "/v1/openapi.jsonx")
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusUnauthorized {
		t.Fatalf("exp 401 beside the document, got %d", resp2.StatusCode)
	}
}
