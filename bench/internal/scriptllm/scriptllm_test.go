package scriptllm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-go/dsh/bench/internal/promptcache"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/openai"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// model is dsh's own DeepSeek adapter aimed at srv, so that the stream is
// read by the code that reads the real one.
func model(t *testing.T, srv *Server) *openai.Model {
	t.Helper()
	cfg := openai.DeepSeek()
	cfg.BaseURL, cfg.MaxRetries = srv.URL, -1
	cfg.Getenv = func(string) string { return "x" }
	m, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func request(system, user string) *llm.Request {
	return &llm.Request{System: system, Messages: []content.Message{content.UserText(user)},
		Tools: []content.ToolSpec{{Name: "glob", Description: "find files", Parameters: json.RawMessage(`{"type":"object"}`)}}}
}

func blocks(t *testing.T, m llm.Model, req *llm.Request) ([]content.Block, content.Usage) {
	t.Helper()
	var out []content.Block
	var usage content.Usage
	for c := range m.Stream(context.Background(), req) {
		switch c.Type {
		case content.ChunkBlockEnd:
			out = append(out, *c.Block)
		case content.ChunkUsage:
			usage = *c.Usage
		case content.ChunkFinish:
			if c.Finish.Failure != nil {
				t.Fatalf("failure: %+v", c.Finish.Failure)
			}
		}
	}
	return out, usage
}

func TestScriptedAnswerThroughTheDeepSeekAdapter(t *testing.T) {
	var seen []Request
	var mu sync.Mutex
	srv := Start(func(r Request) Reply {
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		return Reply{Reasoning: "plan", Text: "two calls", Calls: []promptcache.Call{
			{Name: "subagent", Arguments: `{"prompt":"a"}`}, {Name: "glob", Arguments: `{"pattern":"*"}`}}}
	})
	defer srv.Close()
	m := model(t, srv)
	system := strings.Repeat("the system prompt. ", 60)
	got, usage := blocks(t, m, request(system, "first"))

	var kinds []string
	for _, b := range got {
		kinds = append(kinds, string(b.Type)+":"+b.Text+b.Name+b.Arguments)
	}
	want := []string{"reasoning:plan", "text:two calls", `tool-call:subagent{"prompt":"a"}`, `tool-call:glob{"pattern":"*"}`}
	if strings.Join(kinds, "|") != strings.Join(want, "|") {
		t.Fatalf("blocks = %q, want %q", kinds, want)
	}
	if got[2].ID == got[3].ID || got[2].ID == "" {
		t.Errorf("tool call ids %q and %q must be distinct", got[2].ID, got[3].ID)
	}
	xs := srv.Exchanges()
	if len(xs) != 1 || len(seen) != 1 || seen[0].Model != openai.DeepSeekModel || seen[0].Messages[1].Text != "first" ||
		seen[0].Messages[0].Role != "system" {
		t.Fatalf("exchanges %d, seen %+v", len(xs), seen)
	}
	if usage.Input != int64(len(xs[0].Rendered)/4) || usage.CacheRead != 0 {
		t.Errorf("first usage = %+v for %d rendered bytes", usage, len(xs[0].Rendered))
	}
	r, _ := promptcache.Render(xs[0].Body)
	if !bytes.Equal(r, xs[0].Rendered) || len(xs[0].Calls) != 2 {
		t.Errorf("exchange = %+v", xs[0])
	}

	// The same system prompt and tools again: a hit, floored to 64 tokens,
	// reported in the usage.
	_, usage = blocks(t, m, request(system, "second"))
	xs = srv.Exchanges()
	if xs[1].Seq != 1 || xs[1].Prefix != promptcache.CommonPrefix(xs[0].Rendered, xs[1].Rendered) {
		t.Fatalf("second prefix %d", xs[1].Prefix)
	}
	if want := int64(promptcache.Floor(xs[1].Prefix) / 4); usage.CacheRead != want || want == 0 {
		t.Errorf("second usage = %+v, want %d cached", usage, want)
	}
	if len(srv.Warnings()) != 0 {
		t.Errorf("warnings: %q", srv.Warnings())
	}
}

// Two requests that await each other are answered only once both arrived,
// so neither hits the other's prefix; a third one, later, hits. With
// CacheOnArrival the second to arrive hits the first.
func TestAwaitedRequestsAreSimultaneous(t *testing.T) {
	for _, onArrival := range []bool{false, true} {
		t.Run(fmt.Sprint("CacheOnArrival=", onArrival), func(t *testing.T) { testAwaited(t, onArrival) })
	}
}

func testAwaited(t *testing.T, onArrival bool) {
	srv := New(func(r Request) Reply {
		switch last := r.Messages[len(r.Messages)-1].Text; last {
		case "a", "b":
			other := map[string]string{"a": "b", "b": "a"}[last]
			return Reply{Key: last, Await: []string{other}, Text: "ok " + last}
		}
		return Reply{Text: "later"}
	})
	srv.CacheOnArrival = onArrival
	srv.Start()
	defer srv.Close()
	m := model(t, srv)
	system := strings.Repeat("shared ", 200)
	var wg sync.WaitGroup
	for _, u := range []string{"a", "b"} {
		wg.Go(func() {
			got, _ := blocks(t, m, request(system, u))
			if len(got) != 1 || got[0].Text != "ok "+u {
				t.Errorf("%s answered %+v", u, got)
			}
		})
	}
	wg.Wait()
	blocks(t, m, request(system, "c"))
	xs := srv.Exchanges()
	if len(xs) != 3 || xs[0].Prefix != 0 {
		t.Fatalf("%d exchanges; the first arrival hit %d bytes", len(xs), xs[0].Prefix)
	}
	if hit := xs[1].Prefix >= len(system); hit != onArrival {
		t.Fatalf("the second arrival hit %d bytes of the first", xs[1].Prefix)
	}
	if xs[2].Prefix < len(system) {
		t.Errorf("the later request's prefix %d is shorter than the shared system prompt", xs[2].Prefix)
	}
	if w := srv.Warnings(); len(w) != 0 {
		t.Errorf("warnings: %q", w)
	}
}

func TestAwaitTimesOutWithAWarning(t *testing.T) {
	srv := New(func(Request) Reply { return Reply{Await: []string{"never"}, Text: "alone"} })
	srv.AwaitTimeout = 10 * time.Millisecond
	srv.Start()
	defer srv.Close()
	got, _ := blocks(t, model(t, srv), request("s", "u"))
	if len(got) != 1 || got[0].Text != "alone" {
		t.Fatalf("answer %+v", got)
	}
	if w := srv.Warnings(); len(w) != 1 || !strings.Contains(w[0], `"never" did not arrive`) {
		t.Fatalf("warnings %q", w)
	}
}

// A client that goes away while its answer is held releases the handler.
func TestAwaitEndsWhenTheClientGoesAway(t *testing.T) {
	arrived := make(chan struct{})
	srv := Start(func(Request) Reply { close(arrived); return Reply{Await: []string{"never"}} })
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range model(t, srv).Stream(ctx, request("s", "u")) {
		}
	}()
	<-arrived
	cancel()
	<-done
	srv.Close() // returns once the handler has
	if w := srv.Warnings(); len(w) != 0 {
		t.Errorf("warnings %q", w)
	}
}

func TestRefusesWhatIsNotAChatRequest(t *testing.T) {
	srv := Start(func(Request) Reply { t.Error("the reply function saw a bad request"); return Reply{} })
	defer srv.Close()
	for _, body := range []string{`not json`, `{"messages":"x"}`, `{}`} {
		resp, err := http.Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d", body, resp.StatusCode)
		}
	}
	if len(srv.Exchanges()) != 0 || len(srv.Warnings()) != 3 {
		t.Errorf("exchanges %d, warnings %q", len(srv.Exchanges()), srv.Warnings())
	}
}

func TestReplyStatusAndNote(t *testing.T) {
	srv := Start(func(Request) Reply {
		return Reply{Status: http.StatusTooManyRequests, Text: "slow down", Note: "throttled"}
	})
	defer srv.Close()
	var failure *content.Failure
	for c := range model(t, srv).Stream(context.Background(), request("s", "u")) {
		if c.Type == content.ChunkFinish {
			failure = c.Finish.Failure
		}
	}
	if failure == nil {
		t.Fatal("a 429 answer did not fail the stream")
	}
	if w := srv.Warnings(); len(w) != 1 || w[0] != "throttled" {
		t.Errorf("warnings %q", w)
	}
}
