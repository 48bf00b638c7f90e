// Package proxybody keeps a reverse proxy's outbound request from reading
// its inbound body past the length the request declared.
//
// An HTTP/1 server closes a request's body once its handler starts the
// answer. A Transport that has sent the declared length reads the body once
// more, to check that nothing follows; when the upstream has answered
// before that read (it had all it needed) and the proxy has begun passing
// the answer on, the read fails, the Transport closes the upstream
// connection, and the answer is cut short (golang/go#40747). A proxied
// stream (a command's events, a page still loading) then ends early
// without an error.
package proxybody

import (
	"io"
	"net/http"
)

// Limit makes r's body end at r.ContentLength without reading the
// underlying body beyond it; closing it still closes the underlying body.
// Call it on an outbound request, in a ReverseProxy's Rewrite or Director.
// A body of unknown length (chunked) is left as it is.
func Limit(r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength <= 0 {
		return
	}
	r.Body = limited{io.LimitReader(r.Body, r.ContentLength), r.Body}
}

type limited struct {
	io.Reader
	io.Closer
}
