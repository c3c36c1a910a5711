package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/testing/freeport"
	"go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

// ownNamespace is the namespace that ownServer registers.
const ownNamespace = "dsh-testserver"

// ownServer is a Temporal server configured here rather than by
// temporaltest: over a SQLite file in WAL mode with several connections (or
// in-memory SQLite), with a directory of its own and a chosen number of
// history shards.
type ownServer struct {
	dir      string
	hostPort string
	srv      temporal.Server
}

// startOwn makes a temporary directory under $TMPDIR, creates the schema
// and the namespace in a SQLite file there (or in memory, when file is
// false), and starts the frontend, history, matching and worker services on
// loopback ports; without visibility, no visibility record is written. The
// caller removes the directory with close.
func startOwn(file bool, shards, conns int, pragmas map[string]string, visibility bool, opts []temporal.ServerOption) (*ownServer, error) {
	dir, err := os.MkdirTemp("", "dsh-testserver-")
	if err != nil {
		return nil, err
	}
	s := &ownServer{dir: dir}
	if err := s.start(file, int32(shards), conns, pragmas, visibility, opts); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *ownServer) start(file bool, shards int32, conns int, pragmas map[string]string, visibility bool, opts []temporal.ServerOption) error {
	db := &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: filepath.Join(s.dir, "temporal.db"),
		// Attributes other than SQLite's URI parameters are pragmas, run
		// on each new connection: several readers beside one writer, no
		// fsync (the file dies with the process), and a writer that waits
		// for the lock rather than failing at once.
		ConnectAttributes: map[string]string{
			"mode":         "rwc",
			"journal_mode": "wal",
			"synchronous":  "off",
			"busy_timeout": "10000",
		},
		MaxConns:     conns,
		MaxIdleConns: conns,
	}
	if !file {
		db.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
		db.MaxConns, db.MaxIdleConns = 1, 1
	}
	for k, v := range pragmas {
		db.ConnectAttributes[k] = v
	}
	if file {
		if err := sqlite.SetupSchema(db); err != nil {
			return fmt.Errorf("the SQLite schema: %w", err)
		}
	}
	const clusterName = "active"
	ns, err := sqlite.NewNamespaceConfig(clusterName, ownNamespace, false, nil)
	if err != nil {
		return err
	}
	if err := sqlite.CreateNamespaces(db, ns); err != nil {
		return fmt.Errorf("the namespace: %w", err)
	}
	frontend := freeport.MustGetFreePort()
	s.hostPort = "127.0.0.1:" + strconv.Itoa(frontend)
	service := func(port int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: port, MembershipPort: freeport.MustGetFreePort(), BindOnIP: "127.0.0.1"}}
	}
	cfg := &config.Config{
		Global: config.Global{
			Membership: config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: "127.0.0.1"},
		},
		Persistence: config.Persistence{
			DefaultStore:     "sqlite",
			VisibilityStore:  "sqlite",
			NumHistoryShards: shards,
			DataStores:       map[string]config.DataStore{"sqlite": {SQL: db}},
		},
		ClusterMetadata: &cluster.Config{
			FailoverVersionIncrement: 10,
			MasterClusterName:        clusterName,
			CurrentClusterName:       clusterName,
			ClusterInformation: map[string]cluster.ClusterInformation{
				clusterName: {Enabled: true, InitialFailoverVersion: 1, RPCAddress: s.hostPort},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services: map[string]config.Service{
			"frontend": service(frontend),
			"history":  service(freeport.MustGetFreePort()),
			"matching": service(freeport.MustGetFreePort()),
			"worker":   service(freeport.MustGetFreePort()),
		},
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{Archival: config.ArchivalNamespaceDefaults{
			History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
			Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
		}},
		PublicClient: config.PublicClient{HostPort: s.hostPort},
	}
	if !visibility {
		cfg.Persistence.VisibilityStore = unwritten
		cfg.Persistence.DataStores[unwritten] = config.DataStore{CustomDataStoreConfig: &config.CustomDatastoreConfig{Name: unwritten}}
		opts = append(opts, temporal.WithCustomVisibilityStoreFactory(unwrittenFactory{db}))
	}
	all := append([]temporal.ServerOption{
		temporal.WithConfig(cfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithLogger(log.NewNoopLogger()),
		temporal.WithAuthorizer(authorization.NewNoopAuthorizer()),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return authorization.NewNoopClaimMapper() }),
	}, opts...)
	srv, err := temporal.NewServer(all...)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	s.srv = srv
	return nil
}

// close removes the server's directory; the process exits next, so the
// services are not stopped one by one.
func (s *ownServer) close() {
	if err := os.RemoveAll(s.dir); err != nil {
		fmt.Fprintln(os.Stderr, "testserver:", err)
	}
}
