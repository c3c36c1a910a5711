// Command testserver runs a real Temporal server (go.temporal.io/server's
// temporaltest: frontend, history, matching and worker services over an
// in-memory SQLite store, one history shard) for the end-to-end tests of
// the temporal provider, in a process of its own so that the tests'
// goroutine checks and race detector see none of it. It prints "hostPort
// namespace" on stdout once the server is up, and exits when its stdin
// closes.
//
// For measurements (bench/cmd/temporal): $DSH_TESTSERVER_CPUPROFILE names
// a file for a CPU profile of the server's whole life, and
// $DSH_TESTSERVER_CONFIG sets dynamic configuration keys of the server, as
// key=JSON pairs separated by spaces (e.g.
// "matching.numTaskqueueReadPartitions=1 matching.numTaskqueueWritePartitions=1").
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"
)

func main() {
	opts := []temporal.ServerOption{temporal.WithCustomMetricsHandler(metrics.NoopMetricsHandler)}
	if dc, err := dynamic(os.Getenv("DSH_TESTSERVER_CONFIG")); err != nil {
		fail(err)
	} else if dc != nil {
		opts = append(opts, temporal.WithDynamicConfigClient(dc))
	}
	if path := os.Getenv("DSH_TESTSERVER_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	ts := temporaltest.NewServer(temporaltest.WithBaseServerOptions(opts...))
	fmt.Printf("%s %s\n", ts.GetFrontendHostPort(), ts.GetDefaultNamespace())
	io.Copy(io.Discard, os.Stdin)
	// The process exits without Stop: the store is in memory, and Stop
	// leaves goroutines and listeners behind anyway.
}

// dynamic parses key=JSON pairs into a dynamic configuration, which
// replaces temporaltest's: its one key is kept unless spec sets it.
func dynamic(spec string) (dynamicconfig.StaticClient, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	dc := dynamicconfig.StaticClient{dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true}
	for _, kv := range strings.Fields(spec) {
		k, v, ok := strings.Cut(kv, "=")
		var val any
		if err := json.Unmarshal([]byte(v), &val); !ok || err != nil {
			return nil, fmt.Errorf("$DSH_TESTSERVER_CONFIG: %q is no key=JSON pair", kv)
		}
		if f, isNum := val.(float64); isNum && f == float64(int(f)) {
			val = int(f)
		}
		dc[dynamicconfig.MakeKey(k)] = val
	}
	return dc, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "testserver:", err)
	os.Exit(1)
}
