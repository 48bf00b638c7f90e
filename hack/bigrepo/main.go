// Command bigrepo writes a large git repository for measuring repository
// workspaces: 10,000 files at its head and, by default, about 1 GB of
// packed history (random content rewritten commit after commit), the shape
// `patina bench --repo-history-mb 1000` builds for itself.
//
//	go run ./hack/bigrepo -dir /tmp/big                     # 10,000 files, ~1 GB of history
//	go run ./hack/bigrepo -dir /tmp/small -history-mb 100
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/patina-dev/patina/sidecar/bench"
)

func main() {
	dir := flag.String("dir", "", "the repository to make (must not exist, or be empty)")
	files := flag.Int("files", 10_000, "files at the head")
	historyMB := flag.Int64("history-mb", 1000, "MB (10^6 bytes) of random content in the history")
	seed := flag.Uint64("seed", 1, "the content's seed")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "bigrepo: -dir is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	t0 := time.Now()
	err := bench.MakeRepo(ctx, bench.RepoSpec{Dir: *dir, Files: *files, HistoryBytes: *historyMB * 1_000_000, Seed: *seed})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bigrepo:", err)
		os.Exit(1)
	}
	fmt.Printf("%s: %d files, %.0f MB packed, in %s\n", *dir, *files, float64(bench.RepoPackBytes(*dir))/1e6, time.Since(t0).Round(100*time.Millisecond))
}
