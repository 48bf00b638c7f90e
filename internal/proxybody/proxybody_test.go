package proxybody

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// overRead fails a read past n bytes, as a closed server body does.
type overRead struct {
	r    io.Reader
	n    int64
	read int64
	past atomic.Bool
}

func (o *overRead) Read(p []byte) (int, error) {
	if o.read >= o.n {
		o.past.Store(true)
		return 0, errors.New("read past the declared length")
	}
	n, err := o.r.Read(p)
	o.read += int64(n)
	return n, err
}

func (o *overRead) Close() error { return nil }

func TestLimitNeverReadsPastTheLength(t *testing.T) {
	body := &overRead{r: strings.NewReader("hello"), n: 5}
	r, _ := http.NewRequest(http.MethodPost, "http://x/", body)
	r.ContentLength = 5
	Limit(r)
	b, err := io.ReadAll(r.Body)
	if err != nil || string(b) != "hello" {
		t.Fatalf("read %q, %v; want hello", b, err)
	}
	if n, err := r.Body.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("a read after the length gave %d, %v; want 0, EOF", n, err)
	}
	if body.past.Load() {
		t.Fatal("the underlying body was read past its length")
	}
}

func TestLimitLeavesUnknownLengthsAndEmptyBodies(t *testing.T) {
	r, _ := http.NewRequest(http.MethodPost, "http://x/", io.NopCloser(strings.NewReader("abc")))
	r.ContentLength = -1
	before := r.Body
	Limit(r)
	if r.Body != before {
		t.Fatal("a chunked body was wrapped")
	}
	r, _ = http.NewRequest(http.MethodGet, "http://x/", nil)
	Limit(r)
	if r.Body != nil {
		t.Fatal("an absent body became one")
	}
}

// TestProxiedStreamIsWhole drives the race of golang/go#40747 on purpose:
// the Transport's check read after the declared length is held back until
// the proxy has begun the answer (and its server has closed the inbound
// body). Without Limit the upstream connection is closed and the stream is
// cut; with it, the stream arrives whole.
func TestProxiedStreamIsWhole(t *testing.T) {
	for _, limit := range []bool{true, false} {
		t.Run(fmt.Sprintf("limit=%v", limit), func(t *testing.T) {
			started := make(chan struct{}, 1)
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				time.Sleep(200 * time.Millisecond)
				fmt.Fprint(w, "event: exit\ndata: {}\n\n")
			}))
			defer up.Close()
			target, _ := url.Parse(up.URL)
			proxy := &httputil.ReverseProxy{
				Rewrite: func(pr *httputil.ProxyRequest) {
					pr.SetURL(target)
					if limit {
						Limit(pr.Out)
					}
					pr.Out.Body = &lateCheck{ReadCloser: pr.Out.Body, n: pr.Out.ContentLength, started: started}
				},
				ModifyResponse: func(*http.Response) error {
					select {
					case started <- struct{}{}:
					default:
					}
					return nil
				},
				FlushInterval: -1,
				ErrorLog:      log.New(io.Discard, "", 0),
			}
			front := httptest.NewServer(proxy)
			defer front.Close()

			resp, err := http.Post(front.URL, "application/json", strings.NewReader(`{"command":"echo"}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			whole := strings.Contains(string(b), "event: exit")
			if limit && !whole {
				t.Fatalf("the stream was cut: %q", b)
			}
			if !limit && whole {
				t.Fatalf("without Limit the race was not driven (the test proves nothing): %q", b)
			}
		})
	}
}

// lateCheck holds a read past n until the proxy has begun its answer.
type lateCheck struct {
	io.ReadCloser
	n       int64
	read    int64
	started chan struct{}
}

func (l *lateCheck) Read(p []byte) (int, error) {
	if l.read >= l.n {
		select {
		case <-l.started:
		case <-time.After(5 * time.Second):
		}
		time.Sleep(50 * time.Millisecond) // the server closes the body as the headers go
	}
	n, err := l.ReadCloser.Read(p)
	l.read += int64(n)
	return n, err
}
