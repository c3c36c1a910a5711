// Command testserver runs a real Temporal server (go.temporal.io/server's
// temporaltest: frontend, history, matching and worker services over an
// in-memory SQLite store) for the end-to-end tests of the temporal
// provider, in a process of its own so that the tests' goroutine checks
// and race detector see none of it. It prints "hostPort namespace" on
// stdout once the server is up, and exits when its stdin closes.
//
// With $DSH_TESTSERVER_CPUPROFILE set it writes a CPU profile of the
// server's whole life to that file (for bench/cmd/temporal -profile).
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"
)

func main() {
	if path := os.Getenv("DSH_TESTSERVER_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testserver:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "testserver:", err)
			os.Exit(1)
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	ts := temporaltest.NewServer(temporaltest.WithBaseServerOptions(temporal.WithCustomMetricsHandler(metrics.NoopMetricsHandler)))
	fmt.Printf("%s %s\n", ts.GetFrontendHostPort(), ts.GetDefaultNamespace())
	io.Copy(io.Discard, os.Stdin)
	// The process exits without Stop: the store is in memory, and Stop
	// leaves goroutines and listeners behind anyway.
}
