package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The hostile-model findings about limits (N6, N7, N12, N15 of the audit),
// each through the real binary against a loopback model that counts what
// it is asked.

// limitsRequest is what a scripted reply sees of a chat-completions
// request.
type limitsRequest struct {
	First, Last string   // the first user message's text and the last message's
	LastRole    string   // the last message's role
	Tools       []string // the names of the tools offered
	ToolResults int      // how many tool messages the request holds
}

// limitsReply is one scripted answer: text, or tool calls in one message.
type limitsReply struct {
	Text   string
	Calls  [][2]string // name and arguments of each call
	Delay  time.Duration
	Prompt int // usage reported: prompt tokens (default 3)
	Output int // and completion tokens (default 2)
}

// limitsServer is a loopback OpenAI-compatible endpoint answering with
// reply; calls counts the requests it served.
func limitsServer(t *testing.T, reply func(limitsRequest) limitsReply) (srv *httptest.Server, calls *atomic.Int64) {
	calls = new(atomic.Int64)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		calls.Add(1)
		var req limitsRequest
		for _, tl := range body.Tools {
			req.Tools = append(req.Tools, tl.Function.Name)
		}
		for i, m := range body.Messages {
			var text string
			json.Unmarshal(m.Content, &text)
			switch {
			case m.Role == "tool":
				req.ToolResults++
			case m.Role == "user" && req.First == "":
				req.First = text
			}
			if i == len(body.Messages)-1 {
				req.Last, req.LastRole = text, m.Role
			}
		}
		rep := reply(req)
		select {
		case <-time.After(rep.Delay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		var out bytes.Buffer
		frame := func(delta any, finish string) {
			choice := map[string]any{"index": 0, "delta": delta}
			if finish != "" {
				choice["finish_reason"] = finish
			}
			b, _ := json.Marshal(map[string]any{"choices": []any{choice}})
			fmt.Fprintf(&out, "data: %s\n\n", b)
		}
		if rep.Text != "" {
			frame(map[string]string{"content": rep.Text}, "")
		}
		for i, c := range rep.Calls {
			frame(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": fmt.Sprintf("call_%d", i), "type": "function",
				"function": map[string]string{"name": c[0], "arguments": c[1]}}}}, "")
		}
		finish := "stop"
		if len(rep.Calls) > 0 {
			finish = "tool_calls"
		}
		b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}},
			"usage": map[string]int{"prompt_tokens": cmp.Or(rep.Prompt, 3), "completion_tokens": cmp.Or(rep.Output, 2)}})
		fmt.Fprintf(&out, "data: %s\n\ndata: [DONE]\n\n", b)
		w.Write(out.Bytes())
	}))
	t.Cleanup(srv.Close)
	return srv, calls
}

// runLimited runs `dsh run` with args in a fresh project, with home's
// dsh.yaml (when config is set) and agent definitions (file → content in
// $DSH_HOME/agents), and kills it after limit: a run that does not end by
// itself fails the test.
func runLimited(t *testing.T, srv *httptest.Server, config string, agents map[string]string, limit time.Duration, args ...string) (stderr string, err error) {
	t.Helper()
	home := t.TempDir()
	if len(agents) > 0 {
		os.MkdirAll(filepath.Join(home, "agents"), 0o755)
		for name, text := range agents {
			os.WriteFile(filepath.Join(home, "agents", name), []byte(text), 0o644)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	base := dshCommand(t, srv, home, config, append([]string{"run", "--cwd", t.TempDir()}, args...)...)
	cmd := exec.CommandContext(ctx, base.Path, base.Args[1:]...)
	cmd.Env = base.Env
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("dsh run did not end by itself within %v:\n%s", limit, tail(errOut.String(), 2000))
	}
	return errOut.String(), err
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// N6: a definition naming another provider keeps the tool instance's
// toolFilter, and a child whose definition hides bash cannot give it back
// to a grandchild.
func TestHostileToolFiltersHoldDownTheTree(t *testing.T) {
	var mu sync.Mutex
	offered := map[string][]string{} // task → tools offered
	srv, _ := limitsServer(t, func(r limitsRequest) limitsReply {
		for _, task := range []string{"MOVED", "READER", "GRAND"} {
			if strings.Contains(r.First, task) {
				mu.Lock()
				offered[task] = r.Tools
				mu.Unlock()
				if task == "READER" && r.LastRole == "user" {
					return limitsReply{Calls: [][2]string{{"subagent", `{"description":"deeper","prompt":"GRAND: run bash"}`}}}
				}
				return limitsReply{Text: task + " done"}
			}
		}
		if r.LastRole == "tool" {
			return limitsReply{Text: "parent done"}
		}
		return limitsReply{Calls: [][2]string{{"subagent", fmt.Sprintf(`{"description":"go","prompt":"%s: run bash","subagent_type":%q}`,
			strings.ToUpper(r.Last), r.Last)}}}
	})
	config := "subagents:\n  providers: [{name: spawn}, {name: fork}]\n" +
		"  tools: [{provider: spawn, toolFilter: {deny: [bash]}, subagentTypes: true}]\n"
	agents := map[string]string{
		"moved.md":  "---\nname: moved\ndescription: x\nprovider: fork\n---\n",
		"reader.md": "---\nname: reader\ndescription: x\ntools: read_file, grep, subagent\n---\n",
	}
	// The provider move under a tool that hides bash; the grandchild under
	// the default composition, whose subagent tool hides nothing.
	for _, run := range []struct{ typ, config string }{{"moved", config}, {"reader", ""}} {
		if errOut, err := runLimited(t, srv, run.config, agents, time.Minute, run.typ); err != nil {
			t.Fatalf("run %s: %v\n%s", run.typ, err, errOut)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, task := range []string{"MOVED", "READER", "GRAND"} {
		if got := offered[task]; len(got) == 0 || slices.Contains(got, "bash") {
			t.Errorf("the %s child is offered %v", task, got)
		}
	}
}

// N7: a model that always delegates stops by itself under the default
// configuration: the default token budget ends the tree. Each call
// reports 200,000 tokens, so the default budget (10,000,000) is spent in
// about fifty calls and the test takes seconds.
func TestHostileRecursionStopsWithTheDefaults(t *testing.T) {
	srv, calls := limitsServer(t, func(limitsRequest) limitsReply {
		return limitsReply{Calls: [][2]string{{"subagent", `{"description":"deeper","prompt":"NEST again"}`}}, Prompt: 200_000, Output: 50}
	})
	errOut, err := runLimited(t, srv, "", nil, 45*time.Second, "go")
	if err == nil || !strings.Contains(errOut+err.Error(), "budget") {
		t.Fatalf("err = %v\n%s", err, tail(errOut, 2000))
	}
	t.Logf("%d model calls", calls.Load())
	if n := calls.Load(); n > 10_000_000/200_050+5 {
		t.Fatalf("%d model calls: the default budget did not hold", n)
	}
}

// N7: a parent that answers every completion notice with a hundred more
// background children stops by itself: one turn starts at most
// subagents.maxChildrenPerTurn (default 100) children, and notices spliced
// into a turn whose model has answered count against tasks.maxWakes.
func TestHostileNoticeFanOutStops(t *testing.T) {
	var children atomic.Int64
	fan := make([][2]string, 100)
	for i := range fan {
		fan[i] = [2]string{"subagent", fmt.Sprintf(`{"description":"w%d","prompt":"WAKECHILD %d","run_in_background":true}`, i, i)}
	}
	srv, calls := limitsServer(t, func(r limitsRequest) limitsReply {
		switch {
		case strings.Contains(r.First, "WAKECHILD"):
			children.Add(1)
			return limitsReply{Text: "child ok", Delay: 200 * time.Millisecond}
		case r.LastRole == "tool":
			return limitsReply{Text: "started them"}
		}
		return limitsReply{Calls: fan}
	})
	start := time.Now()
	errOut, err := runLimited(t, srv, "", nil, time.Minute, "fan out")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, tail(errOut, 2000))
	}
	// The first turn may start 100; at most tasks.maxWakes (3) turns that
	// notices open may start 100 each.
	if n := children.Load(); n > 400 {
		t.Fatalf("%d children started (%d model calls in %v)", n, calls.Load(), time.Since(start))
	}
	t.Logf("%d children, %d model calls in %v", children.Load(), calls.Load(), time.Since(start))
}

// N12: sixty-four background children calling the model at once overshoot
// the budget by at most about one call, not one call each: each call holds
// an estimate of its tokens against the budget before it is made.
func TestHostileParallelChildrenHoldTheBudget(t *testing.T) {
	const budget, perCall = 100_000, 5_100
	fan := make([][2]string, 64)
	for i := range fan {
		fan[i] = [2]string{"subagent", fmt.Sprintf(`{"description":"c%d","prompt":"LOOPER %d","run_in_background":true}`, i, i)}
	}
	srv, calls := limitsServer(t, func(r limitsRequest) limitsReply {
		switch {
		case strings.Contains(r.First, "LOOPER"):
			return limitsReply{Calls: [][2]string{{"glob", `{"pattern":"*"}`}}, Delay: 100 * time.Millisecond, Prompt: 5_000, Output: 100}
		case r.LastRole == "tool":
			return limitsReply{Text: "waiting", Prompt: 5_000, Output: 100}
		}
		return limitsReply{Calls: fan, Prompt: 5_000, Output: 100}
	})
	errOut, err := runLimited(t, srv, fmt.Sprintf("budget: {tokens: %d}\n", budget), nil, time.Minute, "fan out")
	if err == nil || !strings.Contains(err.Error()+errOut, "budget") {
		t.Fatalf("err = %v\n%s", err, tail(errOut, 2000))
	}
	t.Logf("%d calls, %d tokens", calls.Load(), calls.Load()*perCall)
	if spent := calls.Load() * perCall; spent > budget+2*perCall {
		t.Fatalf("%d calls spent %d tokens of a %d budget: more than two calls over", calls.Load(), spent, budget)
	}
}

// N15: a negative or absurd step cap is an error, on the command line and
// in the file.
func TestHostileNegativeStepCapsAreErrors(t *testing.T) {
	srv, calls := limitsServer(t, func(limitsRequest) limitsReply {
		return limitsReply{Calls: [][2]string{{"glob", `{"pattern":"*"}`}}}
	})
	errOut, err := runLimited(t, srv, "", nil, 30*time.Second, "--max-steps", "-1", "go")
	if err == nil || !strings.Contains(errOut, "--max-steps: must be between 1 and 10000, got -1") {
		t.Fatalf("--max-steps -1: %v\n%s", err, tail(errOut, 2000))
	}
	errOut, err = runLimited(t, srv, "agent: {maxSteps: -5}\n", nil, 30*time.Second, "go")
	if err == nil || !strings.Contains(errOut, "agent.maxSteps: must be between 1 and 10000, got -5") {
		t.Fatalf("agent.maxSteps -5: %v\n%s", err, tail(errOut, 2000))
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d model calls with a refused cap", n)
	}
}
