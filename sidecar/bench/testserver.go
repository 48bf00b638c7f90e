package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// maxTestBytes bounds what the test server sends in one answer (8 GiB).
const maxTestBytes = 8 << 30

// ServeTestHTTP serves the HTTP test server that port forwarding is
// measured and tested against, run inside a workspace (`patina agent
// test-server`, from the read-only copy of the binary every workspace has):
//
//	GET  /hello             "hello from <hostname>\n"
//	GET  /headers           the request's headers, "Name: value" lines
//	GET  /preview/…         the same (a page at the console's preview paths,
//	                        opened directly on the forward: what a browser
//	                        sends it)
//	GET  /bytes?n=N         N zero bytes (at most 8 GiB)
//	GET  /respond?status=S&Name=value…
//	                        status S (default 200) with each other query
//	                        parameter as a response header
//	GET  /stream?n=K&ms=M   K lines, each flushed, M ms apart (chunked)
//	POST /echo              the request body back
//	GET  /upgrade           101 Switching Protocols, then the raw
//	                        connection echoes what it reads (a WebSocket's
//	                        path through a proxy, without its framing)
//
// It returns when ctx ends or ln fails.
func ServeTestHTTP(ctx context.Context, ln net.Listener) error {
	host, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s\n", host)
	})
	headers := func(w http.ResponseWriter, r *http.Request) { _ = r.Header.Write(w) }
	mux.HandleFunc("GET /headers", headers)
	mux.HandleFunc("GET /preview/", headers)
	mux.HandleFunc("GET /respond", func(w http.ResponseWriter, r *http.Request) {
		code := http.StatusOK
		for k, vs := range r.URL.Query() {
			if k == "status" {
				if n, err := strconv.Atoi(vs[0]); err == nil && n >= 200 && n <= 599 {
					code = n
				}
				continue
			}
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		w.WriteHeader(code)
		fmt.Fprintln(w, "respond")
	})
	mux.HandleFunc("GET /bytes", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		if err != nil || n < 0 || n > maxTestBytes {
			http.Error(w, "n must be a byte count up to 8 GiB", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		buf := make([]byte, 64<<10)
		for n > 0 {
			k := min(n, int64(len(buf)))
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		k, err1 := strconv.Atoi(r.URL.Query().Get("n"))
		ms, err2 := strconv.Atoi(r.URL.Query().Get("ms"))
		if err1 != nil || err2 != nil || k < 0 || k > 100_000 || ms < 0 || ms > 10_000 {
			http.Error(w, "n (≤ 100000) and ms (≤ 10000) are required", http.StatusBadRequest)
			return
		}
		fl, _ := w.(http.Flusher)
		for i := 0; i < k; i++ {
			if _, err := fmt.Fprintf(w, "line %d\n", i); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Duration(ms) * time.Millisecond):
			}
		}
	})
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(w, r.Body)
	})
	mux.HandleFunc("GET /upgrade", func(w http.ResponseWriter, r *http.Request) {
		hj, ok := w.(http.Hijacker)
		if !ok {
			http.Error(w, "cannot hijack", http.StatusInternalServerError)
			return
		}
		conn, brw, err := hj.Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		io.Copy(conn, bufio.NewReader(io.MultiReader(brw.Reader, conn)))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	err := srv.Serve(ln)
	if ctx.Err() != nil {
		return nil
	}
	return err
}
