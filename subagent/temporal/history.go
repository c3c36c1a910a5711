package temporal

import (
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
)

// logReader rebuilds a child's log from its workflow's history: the
// checkpoints the workflow accepted, in the order it applied them. An
// update's arguments are in its acceptance event, its outcome in its
// completion; a checkpoint the validator refused leaves no trace. The
// end of the log is in the completion of the attempt that ran the child's
// turn to its end (Outcome.Tail).
type logReader struct {
	pending map[string]*commonpb.Payloads // accepted checkpoints not yet completed, by update id
	length  int                           // events of the log so far
}

// add reads one history event and returns the checkpoint it completes, if
// any.
func (r *logReader) add(e *historypb.HistoryEvent) (*Checkpoint, error) {
	switch e.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
		req := e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest()
		if req.GetInput().GetName() != CheckpointUpdate {
			return nil, nil
		}
		if r.pending == nil {
			r.pending = map[string]*commonpb.Payloads{}
		}
		r.pending[req.GetMeta().GetUpdateId()] = req.GetInput().GetArgs()
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
		attrs := e.GetWorkflowExecutionUpdateCompletedEventAttributes()
		id := attrs.GetMeta().GetUpdateId()
		args, ok := r.pending[id]
		if !ok {
			return nil, nil
		}
		delete(r.pending, id)
		if attrs.GetOutcome().GetFailure() != nil {
			return nil, nil
		}
		var cp Checkpoint
		if err := converter.GetDefaultDataConverter().FromPayloads(args, &cp); err != nil {
			return nil, fmt.Errorf("history event %d: checkpoint %s: %w", e.GetEventId(), id, err)
		}
		return r.extend(e, id, &cp)
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		var out Outcome
		if err := converter.GetDefaultDataConverter().FromPayloads(e.GetActivityTaskCompletedEventAttributes().GetResult(), &out); err != nil {
			return nil, fmt.Errorf("history event %d: the attempt's outcome: %w", e.GetEventId(), err)
		}
		if out.Tail == nil {
			return nil, nil
		}
		return r.extend(e, "tail", out.Tail)
	}
	return nil, nil
}

// extend adds cp, read from history event e, to the log.
func (r *logReader) extend(e *historypb.HistoryEvent, id string, cp *Checkpoint) (*Checkpoint, error) {
	for i, ev := range cp.Events {
		if cp.From != r.length || ev.Seq != int64(r.length+i) {
			return nil, fmt.Errorf("history event %d: checkpoint %s continues the log at %d (event seq %d), but it holds %d events",
				e.GetEventId(), id, cp.From, ev.Seq, r.length)
		}
	}
	r.length += len(cp.Events)
	return cp, nil
}
