package main

import (
	"context"
	"errors"

	"go.temporal.io/server/chasm"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/namespace"
	"go.temporal.io/server/common/persistence/serialization"
	"go.temporal.io/server/common/persistence/visibility/manager"
	"go.temporal.io/server/common/persistence/visibility/store"
	sqlvisibility "go.temporal.io/server/common/persistence/visibility/store/sql"
	"go.temporal.io/server/common/resolver"
	"go.temporal.io/server/common/searchattribute"
)

// unwritten is the name of the custom visibility store that writes no
// records.
const unwritten = "sqlite-unwritten"

// unwrittenFactory makes the SQL visibility store over sql, with its
// writes dropped: a server whose visibility lives elsewhere, as on a
// cluster with Elasticsearch, for measuring what the rest costs.
type unwrittenFactory struct{ sql *config.SQL }

// NewVisibilityStore implements visibility.VisibilityStoreFactory.
func (f unwrittenFactory) NewVisibilityStore(cfg config.CustomDatastoreConfig, sa searchattribute.Provider,
	saMapper searchattribute.MapperProvider, _ namespace.Registry, chasmRegistry *chasm.Registry,
	r resolver.ServiceResolver, logger log.Logger, mh metrics.Handler) (store.VisibilityStore, error) {
	if cfg.Name != unwritten {
		return nil, errors.New("testserver: no visibility store named " + cfg.Name)
	}
	s, err := sqlvisibility.NewSQLVisibilityStore(*f.sql, r, sa, saMapper, chasmRegistry,
		dynamicconfig.VisibilityEnableUnifiedQueryConverter.Get(dynamicconfig.NewNoopCollection()), logger, mh, serialization.NewSerializer())
	if err != nil {
		return nil, err
	}
	return unwrittenStore{s}, nil
}

// unwrittenStore is a visibility store whose writes do nothing: lists and
// counts find no workflow.
type unwrittenStore struct{ store.VisibilityStore }

func (unwrittenStore) RecordWorkflowExecutionStarted(context.Context, *store.InternalRecordWorkflowExecutionStartedRequest) error {
	return nil
}

func (unwrittenStore) RecordWorkflowExecutionClosed(context.Context, *store.InternalRecordWorkflowExecutionClosedRequest) error {
	return nil
}

func (unwrittenStore) UpsertWorkflowExecution(context.Context, *store.InternalUpsertWorkflowExecutionRequest) error {
	return nil
}

func (unwrittenStore) DeleteWorkflowExecution(context.Context, *manager.VisibilityDeleteWorkflowExecutionRequest) error {
	return nil
}
