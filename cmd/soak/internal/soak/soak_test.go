package soak_test

import (
	"context"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/cmd/soak/internal/soak"
	"github.com/dsh-go/dsh/internal/dshbin"
	"github.com/dsh-go/dsh/internal/proc"
)

// TestSoak runs 2,000 delegations through spawn, fork and acp (this dsh in
// acp mode) with cancellations at random phases, then checks that every
// start produced one start and one end event, that no goroutine and no child
// process is left, and that every session file reloads balanced. Skipped
// with -short.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: skipped with -short")
	}
	ignore := goleak.IgnoreCurrent()
	bin, err := dshbin.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := soak.Run(ctx, soak.Config{Delegations: 2000, Concurrency: 8, Dir: t.TempDir(), DshBinary: bin, Seed: 1})
	t.Log(rep)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Started == 0 || rep.ByProvider["acp"] == 0 || rep.ByProvider["spawn"] == 0 || rep.ByProvider["fork"] == 0 {
		t.Fatalf("the mix did not cover every provider: %v", rep)
	}
	if c := children(); len(c) > 0 {
		t.Fatalf("child processes left: %v", c)
	}
	goleak.VerifyNone(t, ignore)
}

// children lists the live child processes of this test.
func children() []string { return proc.Children(os.Getpid()) }
