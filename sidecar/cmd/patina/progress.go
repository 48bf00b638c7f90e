package main

import (
	"fmt"
	"io"
	"os"
	"time"
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
	stop, finished := make(chan struct{}), make(chan struct{})
	start := now()
	go func() {
		defer close(finished)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		spin := `|/-\`
		for i := 0; ; i++ {
			fmt.Fprintf(w, "\r\033[K%c %s… %s", spin[i%len(spin)], what, now().Sub(start).Truncate(time.Second))
			select {
			case <-stop:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(stop)
		<-finished
	}
}
