package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/patina-dev/patina/internal/lines"
)

// progressEvery is how often a progress line is redrawn.
const progressEvery = 200 * time.Millisecond

// progress shows a one-line progress indicator ("| forking demo… 3s") on
// stderr while long work runs, when stderr is a terminal; elsewhere (a
// pipe, a file, CI) it writes nothing. done clears the line.
func (a *app) progress(what string) (done func()) {
	f, ok := a.stderr.(*os.File)
	if !ok || !isTerminal(f) {
		return func() {}
	}
	return progressLine(f, what, time.Now)
}

// progressLine redraws "spinner what… elapsed" on w until done is called.
func progressLine(w io.Writer, what string, now func() time.Time) (done func()) {
	start := now()
	spin := `|/-\`
	return liveLine(w, func(i int) string {
		return fmt.Sprintf("%c %s… %s", spin[i%len(spin)], what, now().Sub(start).Truncate(time.Second))
	})
}

// liveLine rewrites one line of w every progressEvery with line(i), i
// counting from 0, until done is called (once or more), which clears it.
func liveLine(w io.Writer, line func(i int) string) (done func()) {
	stop, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for i := 0; ; i++ {
			fmt.Fprintf(w, "\r\033[K%s", line(i))
			select {
			case <-stop:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			<-finished
		})
	}
}

// buildTail is a build's progress for the CLI: on a terminal its latest
// output line, rewritten in place ("building template: Step 3/7 : RUN …",
// cut to maxShown); off one, nothing. It keeps the last tailKeep lines,
// which Tail gives back when the build fails (its cause is in them).
type buildTail struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	what  string
	split lines.Splitter
	last  []string
	open  bool // a rewritten line is on screen
}

const (
	tailKeep = 20
	maxShown = 100
)

// newBuildTail returns the progress of what (shown on w if tty).
func newBuildTail(w io.Writer, tty bool, what string) *buildTail {
	return &buildTail{w: w, tty: tty, what: what}
}

func (b *buildTail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.split.Feed(p, b.line)
	return len(p), nil
}

// line takes one line of the build's output (b.mu held).
func (b *buildTail) line(line string) {
	if strings.TrimSpace(line) == "" {
		return
	}
	b.last = append(b.last, line)
	if len(b.last) > tailKeep {
		b.last = b.last[1:]
	}
	if b.tty {
		shown := []rune(strings.Map(printable, line))
		if len(shown) > maxShown {
			shown = append(shown[:maxShown-1], '…')
		}
		fmt.Fprintf(b.w, "\r\033[K%s: %s", b.what, string(shown))
		b.open = true
	}
}

// printable drops control characters from a line shown in place.
func printable(r rune) rune {
	if r < 0x20 || r == 0x7f {
		return -1
	}
	return r
}

// Close clears the rewritten line.
func (b *buildTail) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open {
		fmt.Fprint(b.w, "\r\033[K")
		b.open = false
	}
}

// Tail is the build's last lines.
func (b *buildTail) Tail() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.last...)
}
