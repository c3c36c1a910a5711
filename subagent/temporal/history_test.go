package temporal

import (
	"fmt"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	updatepb "go.temporal.io/api/update/v1"
	"go.temporal.io/sdk/converter"

	"github.com/dsh-go/dsh/session"
)

// accepted and completed are the history events of one checkpoint update.
func accepted(id string, args *commonpb.Payloads) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionUpdateAcceptedEventAttributes{
			WorkflowExecutionUpdateAcceptedEventAttributes: &historypb.WorkflowExecutionUpdateAcceptedEventAttributes{
				AcceptedRequest: &updatepb.Request{Meta: &updatepb.Meta{UpdateId: id},
					Input: &updatepb.Input{Name: CheckpointUpdate, Args: args}}}}}
}

func completed(id string, ok bool) *historypb.HistoryEvent {
	outcome := &updatepb.Outcome{Value: &updatepb.Outcome_Success{Success: &commonpb.Payloads{}}}
	if !ok {
		outcome.Value = &updatepb.Outcome_Failure{Failure: &failurepb.Failure{Message: "no"}}
	}
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionUpdateCompletedEventAttributes{
			WorkflowExecutionUpdateCompletedEventAttributes: &historypb.WorkflowExecutionUpdateCompletedEventAttributes{
				Meta: &updatepb.Meta{UpdateId: id}, Outcome: outcome}}}
}

func payloads(t testing.TB, v any) *commonpb.Payloads {
	p, err := converter.GetDefaultDataConverter().ToPayloads(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The reader keeps the checkpoints the workflow applied, in order, and
// refuses a history whose checkpoints do not continue the log.
func TestLogReader(t *testing.T) {
	var r logReader
	var log []session.Event
	feed := func(e *historypb.HistoryEvent) {
		t.Helper()
		cp, err := r.add(e)
		if err != nil {
			t.Fatal(err)
		}
		if cp != nil {
			log = append(log, cp.Events...)
		}
	}
	feed(accepted("claim", payloads(t, Checkpoint{Attempt: 1, Header: &session.Header{ID: "c"}})))
	feed(completed("claim", true))
	feed(accepted("a", payloads(t, Checkpoint{Attempt: 1, Events: events(0, 2)})))
	feed(accepted("other", &commonpb.Payloads{})) // still open
	feed(completed("a", true))
	feed(accepted("refused", payloads(t, Checkpoint{Attempt: 1, From: 2, Events: events(2, 5)})))
	feed(completed("refused", false))
	feed(completed("unknown", true))
	feed(accepted("b", payloads(t, Checkpoint{Attempt: 1, From: 2, Events: events(2, 1)})))
	feed(completed("b", true))
	if len(log) != 3 || r.length != 3 || log[2].Seq != 2 {
		t.Fatalf("log %v (length %d): want seqs 0..2", log, r.length)
	}
	// The end of the log comes with the attempt's outcome.
	feed(&historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, Attributes: &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{
		ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{Result: payloads(t, Outcome{StopReason: "completed"})}}})
	feed(&historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, Attributes: &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{
		ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{
			Result: payloads(t, Outcome{StopReason: "completed", Tail: &Checkpoint{Attempt: 1, From: 3, Events: events(3, 2)}})}}})
	if len(log) != 5 || r.length != 5 || log[4].Seq != 4 {
		t.Fatalf("log %v (length %d): want seqs 0..4, the tail's included", log, r.length)
	}
	// A checkpoint the workflow could not have applied is an error.
	r.add(accepted("gap", payloads(t, Checkpoint{Attempt: 1, From: 9, Events: events(9, 1)})))
	if _, err := r.add(completed("gap", true)); err == nil {
		t.Error("a checkpoint with a gap was read")
	}
	r.add(accepted("junk", &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte("{")}}}))
	if _, err := r.add(completed("junk", true)); err == nil {
		t.Error("an undecodable checkpoint was read")
	}
}

// FuzzLogReader feeds the reader a checkpoint's payload as a worker (or
// anyone able to send the update) could write it: it never panics, and
// what it accepts continues the log.
func FuzzLogReader(f *testing.F) {
	for _, cp := range []Checkpoint{
		{Attempt: 1, Header: &session.Header{ID: "c", Cwd: "/w"}},
		{Attempt: 1, Events: events(0, 2)},
		{Attempt: 2, From: 0, Events: []session.Event{{Seq: 0, Type: session.TypeTurnStart, Data: session.TurnStart{Turn: 1}}}},
	} {
		p := payloads(f, cp)
		f.Add(p.Payloads[0].Data, string(p.Payloads[0].Metadata["encoding"]))
	}
	f.Add([]byte(`{"from":0,"events":[{"type":"x","seq":0,"time":0,"data":null}]}`), "json/plain")
	f.Add([]byte(`{"from":0,"events":[{"type":"turn/end","seq":0,"time":0,"data":{"turn":"x"}}]}`), "json/plain")
	f.Fuzz(func(t *testing.T, data []byte, encoding string) {
		var r logReader
		for i := range 2 {
			id := fmt.Sprint(i)
			args := &commonpb.Payloads{Payloads: []*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte(encoding)}, Data: data}}}
			if _, err := r.add(accepted(id, args)); err != nil {
				t.Fatal(err)
			}
			before := r.length
			cp, err := r.add(completed(id, true))
			if err != nil || cp == nil {
				continue
			}
			for j, e := range cp.Events {
				if e.Seq != int64(before+j) {
					t.Fatalf("accepted event %d has seq %d", before+j, e.Seq)
				}
			}
			if r.length != before+len(cp.Events) {
				t.Fatalf("length %d after %d + %d events", r.length, before, len(cp.Events))
			}
		}
	})
}
