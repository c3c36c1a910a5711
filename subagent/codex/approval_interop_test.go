package codex_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// planted is the file the mock model's command would create.
const planted = "PLANTED"

// execModel is a Responses API on loopback whose model runs one command
// through Codex's exec_command tool (`touch PLANTED`), then answers with
// what the tool returned.
func execModel(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Input []map[string]any `json:"input"`
		}
		if r.URL.Path != "/v1/responses" || json.NewDecoder(r.Body).Decode(&body) != nil {
			http.Error(w, "unexpected request", http.StatusNotFound)
			return
		}
		output := ""
		for _, in := range body.Input {
			if in["type"] == "function_call_output" {
				b, _ := json.Marshal(in["output"])
				output = string(b)
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		event := func(v map[string]any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
			w.(http.Flusher).Flush()
		}
		event(map[string]any{"type": "response.created", "response": map[string]any{"id": "resp_1"}})
		if output == "" {
			args := `{"cmd":"touch ` + planted + `"}`
			item := map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command", "arguments": "", "status": "in_progress"}
			event(map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
			event(map[string]any{"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": args})
			event(map[string]any{"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0, "arguments": args})
			item["arguments"], item["status"] = args, "completed"
			event(map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
		} else {
			text := "tool said: " + output
			part := map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
			event(map[string]any{"type": "response.output_item.added", "output_index": 0,
				"item": map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []any{}}})
			event(map[string]any{"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": text})
			event(map[string]any{"type": "response.output_item.done", "output_index": 0,
				"item": map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": []any{part}}})
		}
		event(map[string]any{"type": "response.completed", "response": map[string]any{"id": "resp_1", "usage": map[string]any{
			"input_tokens": 11, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 16}}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// In its default permission mode the real Codex asks before it runs a
// command, and the parent's permission policy answers: bash denied or the
// ask refused, nothing runs; bash allowed, the command runs.
func TestRealCodexAsksTheParentsPolicy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		bash    permission.Decision
		answer  permission.Answer
		asked   bool
		created bool
	}{
		{"deny", permission.Deny, permission.AllowOnce, false, false},
		{"ask-refused", permission.Ask, permission.Reject, true, false},
		{"allow", permission.Allow, permission.AllowOnce, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := execModel(t)
			cfg := realConfig(t, &llmtest.Responses{Server: srv})
			var mu sync.Mutex
			var asked []string
			parent := subagenttest.PolicyParent(t, permission.Rules{Tools: map[string]permission.Decision{"bash": tc.bash}},
				permission.AskerFunc(func(_ context.Context, r permission.Request) (permission.Answer, error) {
					mu.Lock()
					asked = append(asked, r.Who()+": "+r.Tool)
					mu.Unlock()
					return tc.answer, nil
				}))
			run := start(t, newProvider(t, cfg), context.Background(),
				subagent.StartRequest{Label: "plant", Prompt: subagenttest.Prompt("plant a file"), Parent: parent, Depth: 1})
			res := subagenttest.Wait(t, run)
			subagenttest.Dispose(t, run)
			checkNoChildren(t)
			if res.StopReason != subagent.Completed {
				t.Fatalf("result %+v", res)
			}
			_, err := os.Stat(filepath.Join(parent.Cwd(), planted))
			if created := err == nil; created != tc.created {
				t.Errorf("the command's file exists: %v, want %v (Codex answered %q)", created, tc.created, content.JoinText(res.Output))
			}
			mu.Lock()
			defer mu.Unlock()
			if want := "codex · plant: bash"; tc.asked != (len(asked) == 1 && asked[0] == want) || (!tc.asked && len(asked) > 0) {
				t.Errorf("the tree's asker was asked %q, want %v", asked, map[bool]string{true: want, false: "nothing"}[tc.asked])
			}
		})
	}
}
