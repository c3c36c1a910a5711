package session

import (
	"fmt"

	"github.com/dsh-go/dsh/content"
)

// logState is what a walk over a log leaves open.
type logState struct {
	turn, step   int // open turn and step (0: none)
	lastTurn     int
	lastStep     int
	pendingCalls []content.Block // assistant tool calls without a result, in model order
	started      map[string]int64
}

// scan walks events and reports the first structural violation: seq gaps,
// nested or unbalanced turns and steps, or a result for no call.
func scan(events []Event) (logState, error) {
	st := logState{started: map[string]int64{}}
	for i, e := range events {
		if e.Seq != int64(i) {
			return st, fmt.Errorf("event %d has seq %d: seqs must be contiguous from 0", i, e.Seq)
		}
		switch d := e.Data.(type) {
		case TurnStart:
			if st.turn != 0 {
				return st, fmt.Errorf("event %d: turn %d starts inside open turn %d", i, d.Turn, st.turn)
			}
			st.turn, st.lastTurn, st.lastStep = d.Turn, d.Turn, 0
		case TurnEnd:
			if st.turn == 0 || st.step != 0 {
				return st, fmt.Errorf("event %d: turn/end without an open turn, or inside an open step", i)
			}
			st.turn = 0
		case Step:
			if e.Type == TypeStepStart {
				if st.turn == 0 || st.step != 0 {
					return st, fmt.Errorf("event %d: step/start outside a turn or inside an open step", i)
				}
				st.step, st.lastStep = d.Step, d.Step
				clear(st.started) // call ids may repeat across steps
			} else {
				if st.step == 0 {
					return st, fmt.Errorf("event %d: step/end without an open step", i)
				}
				st.step = 0
			}
		case AssistantMessage:
			st.pendingCalls = append(st.pendingCalls, content.ToolCalls(d.Message.Content)...)
		case ToolCall:
			st.started[d.CallID] = e.Seq
		case ToolResult:
			id := ""
			if len(d.Message.Content) == 1 {
				id = d.Message.Content[0].ToolCallID
			}
			n := len(st.pendingCalls)
			st.pendingCalls = removeCall(st.pendingCalls, id)
			if len(st.pendingCalls) == n {
				return st, fmt.Errorf("event %d: tool result for unknown call %q", i, id)
			}
		}
	}
	return st, nil
}

func removeCall(calls []content.Block, id string) []content.Block {
	for i, c := range calls {
		if c.ID == id {
			return append(calls[:i:i], calls[i+1:]...)
		}
	}
	return calls
}

// CheckBalanced reports whether events form a replayable log of completed
// turns: seqs contiguous from 0, no open turn or step, every tool call
// answered. Seeds must pass it.
func CheckBalanced(events []Event) error {
	st, err := scan(events)
	switch {
	case err != nil:
		return err
	case st.turn != 0:
		return fmt.Errorf("turn %d is not finished", st.turn)
	case len(st.pendingCalls) > 0:
		return fmt.Errorf("tool call %q has no result", st.pendingCalls[0].ID)
	}
	return nil
}

// closers returns the events that close an interrupted last turn, as crash
// repair appends them: an error result for each unanswered tool call, the
// open step's end, and turn/end interrupted. A balanced log needs none.
func closers(events []Event) ([]Event, error) {
	st, err := scan(events)
	if err != nil {
		return nil, err
	}
	if st.turn == 0 && len(st.pendingCalls) == 0 {
		return nil, nil
	}
	var out []Event
	add := func(typ string, data any, src ...int64) {
		e := Event{Type: typ, Data: data}
		if isSurface(typ) {
			e.SourceEventSeqs = src
		}
		out = append(out, e)
	}
	for _, c := range st.pendingCalls {
		code, text := "TOOL_NOT_STARTED", "Error: tool call was not started before the session was interrupted; retry if still needed"
		var src []int64
		if seq, ok := st.started[c.ID]; ok {
			code = "TOOL_OUTCOME_UNKNOWN"
			text = fmt.Sprintf("Error: the session was interrupted while tool call (event %d) ran; outcome unknown; retry only if idempotent, verify side effects", seq)
			src = []int64{seq}
		}
		add(TypeToolResult, ToolResult{Turn: st.lastTurn, Step: st.lastStep,
			Message: content.ToolResultMessage(c.ID, []content.Block{content.Text(text)}, true),
			Error:   &ErrorInfo{Name: "RepairError", Code: code}}, src...)
	}
	if st.step != 0 {
		add(TypeStepEnd, Step{Turn: st.turn, Step: st.step})
	}
	if st.turn != 0 {
		add(TypeTurnEnd, TurnEnd{Turn: st.turn, Reason: EndReason{Kind: EndInterrupted}})
	}
	last := events[len(events)-1]
	for i := range out {
		out[i].Seq = last.Seq + 1 + int64(i)
		out[i].Time = last.Time
		if r, ok := out[i].Data.(ToolResult); ok { // deterministic, so every repair agrees
			r.Message.ID = fmt.Sprintf("repair-%d", out[i].Seq)
			out[i].Data = r
		}
	}
	return out, nil
}

// Repair returns events followed by the closers of an interrupted last turn.
func Repair(events []Event) ([]Event, error) {
	extra, err := closers(events)
	if err != nil {
		return nil, err
	}
	return append(events[:len(events):len(events)], extra...), nil
}

// CompletedPrefix returns the events from 0 through the last turn/end: the
// balanced prefix a fork child is seeded with. No completed turn → nil.
func CompletedPrefix(events []Event) []Event {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type == TypeTurnEnd {
			return events[: i+1 : i+1]
		}
	}
	return nil
}
