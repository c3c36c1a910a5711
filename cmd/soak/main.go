// Command soak runs many delegations through spawn, fork and acp children
// with cancellations at random phases and checks that nothing leaks and
// every session file stays valid. It builds dsh for the acp children unless
// -dsh names a binary.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/dsh-go/dsh/cmd/soak/internal/soak"
	"github.com/dsh-go/dsh/internal/dshbin"
)

func main() {
	n := flag.Int("n", 2000, "delegations to run")
	conc := flag.Int("c", 8, "delegations at once")
	bin := flag.String("dsh", "", "dsh binary for acp children (default: build one)")
	acp := flag.Float64("acp", 0.05, "share of acp children")
	seed := flag.Uint64("seed", uint64(time.Now().UnixNano()), "random seed")
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := run(*n, *conc, *bin, *acp, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func run(n, conc int, bin string, acp float64, seed uint64) error {
	dir, err := os.MkdirTemp("", "dsh-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		if bin, err = dshbin.Build(dir); err != nil {
			return err
		}
	}
	fmt.Printf("soak: %d delegations, %d at once, seed %d\n", n, conc, seed)
	rep, err := soak.Run(context.Background(), soak.Config{Delegations: n, Concurrency: conc, Dir: dir, DshBinary: bin, ACPShare: acp, Seed: seed})
	fmt.Println(rep)
	return err
}
