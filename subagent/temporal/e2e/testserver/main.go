// Command testserver runs a real Temporal server (go.temporal.io/server's
// temporaltest: frontend, history, matching and worker services over an
// in-memory SQLite store, one history shard) for the end-to-end tests of
// the temporal provider, in a process of its own so that the tests'
// goroutine checks and race detector see none of it. It prints "hostPort
// namespace" on stdout once the server is up, and exits when its stdin
// closes (or at SIGINT or SIGTERM).
//
// For measurements (bench/cmd/temporal): $DSH_TESTSERVER_CPUPROFILE names
// a file for a CPU profile of the server's whole life, and
// $DSH_TESTSERVER_CONFIG sets dynamic configuration keys of the server, as
// key=JSON pairs separated by spaces (e.g.
// "matching.numTaskqueueReadPartitions=1 matching.numTaskqueueWritePartitions=1").
//
// $DSH_TESTSERVER_STORE=wal runs the same services with a configuration of
// this command's own instead: a SQLite file in WAL mode, in a directory of
// its own under $TMPDIR that is removed at exit, with $DSH_TESTSERVER_CONNS
// connections to it (default 8), so that persistence is not one transaction
// after another; and $DSH_TESTSERVER_SHARDS history shards (default 4).
// $DSH_TESTSERVER_STORE=memory is that configuration over in-memory SQLite
// (one connection). With either, $DSH_TESTSERVER_VISIBILITY=off writes no
// visibility records (lists and counts of workflows find nothing), and
// $DSH_TESTSERVER_SQLITE adds SQLite pragmas as key=value pairs separated by
// spaces (e.g. "mmap_size=268435456").
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"
)

func main() {
	if err := run(); err != nil {
		fail(err)
	}
}

// run starts the server, says where it listens, and returns when stdin
// closes or a signal comes.
func run() error {
	opts := []temporal.ServerOption{temporal.WithCustomMetricsHandler(metrics.NoopMetricsHandler)}
	dc, err := dynamic(os.Getenv("DSH_TESTSERVER_CONFIG"))
	if err != nil {
		return err
	}
	store := os.Getenv("DSH_TESTSERVER_STORE")
	if dc == nil && store != "" {
		dc = baseDynamic()
	}
	if dc != nil {
		opts = append(opts, temporal.WithDynamicConfigClient(dc))
	}
	if path := os.Getenv("DSH_TESTSERVER_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	switch store {
	case "":
		ts := temporaltest.NewServer(temporaltest.WithBaseServerOptions(opts...))
		fmt.Printf("%s %s\n", ts.GetFrontendHostPort(), ts.GetDefaultNamespace())
		// The process exits without Stop: the store is in memory, and Stop
		// leaves goroutines and listeners behind anyway.
	case "wal", "memory":
		shards, err := positive("DSH_TESTSERVER_SHARDS", 4)
		if err != nil {
			return err
		}
		conns, err := positive("DSH_TESTSERVER_CONNS", 8)
		if err != nil {
			return err
		}
		pragmas := map[string]string{}
		for _, kv := range strings.Fields(os.Getenv("DSH_TESTSERVER_SQLITE")) {
			k, v, _ := strings.Cut(kv, "=")
			pragmas[k] = v
		}
		var visibility bool
		switch v := os.Getenv("DSH_TESTSERVER_VISIBILITY"); v {
		case "", "on":
			visibility = true
		case "off":
		default:
			return fmt.Errorf("$DSH_TESTSERVER_VISIBILITY: %q is neither on nor off", v)
		}
		s, err := startOwn(store == "wal", shards, conns, pragmas, visibility, opts)
		if err != nil {
			return err
		}
		defer s.close()
		fmt.Printf("%s %s\n", s.hostPort, ownNamespace)
	default:
		return fmt.Errorf("$DSH_TESTSERVER_STORE: %q is neither memory nor wal", store)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	<-ctx.Done()
	return nil
}

// positive reads a positive integer from the environment variable name,
// or returns def when it is unset.
func positive(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1024 {
		return 0, fmt.Errorf("$%s: %q is no number from 1 to 1024", name, v)
	}
	return n, nil
}

// dynamic parses key=JSON pairs into a dynamic configuration, which
// replaces temporaltest's: its one key is kept unless spec sets it.
func dynamic(spec string) (dynamicconfig.StaticClient, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	dc := baseDynamic()
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

// baseDynamic is temporaltest's dynamic configuration: search attributes
// are read afresh, so that a test sees one as soon as it is added.
func baseDynamic() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): true}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "testserver:", err)
	os.Exit(1)
}
