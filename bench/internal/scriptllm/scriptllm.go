// Package scriptllm is a loopback OpenAI-compatible chat-completions server
// that plays a script and keeps every request body in full. A reply
// function decides each answer (reasoning, text, any number of tool calls)
// from the request's messages; a reply may hold its answer until other
// named requests have arrived, so that children started together reach the
// model together. Each request's prompt-cache hit is simulated
// (promptcache) at its arrival, against the requests answered before it
// (or, with CacheOnArrival, that arrived before it), and reported in the
// usage the answer carries, in DeepSeek's fields.
package scriptllm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	"github.com/dsh-go/dsh/bench/internal/promptcache"
)

// Message is what a reply function sees of one message of a request.
type Message struct {
	Role      string
	Text      string // the content's text
	ToolCalls int    // tool calls an assistant message carries
}

// Request is what a reply function sees of a request.
type Request struct {
	Seq      int // arrival order, from 0
	Model    string
	Messages []Message
}

// Reply is one answer.
type Reply struct {
	// Key names this request for other replies' Await ("" for none).
	Key string
	// Await holds the answer until a request of each key has arrived.
	Await     []string
	Reasoning string // streamed as reasoning_content first
	Text      string
	Calls     []promptcache.Call
	// Status, when not 0, answers with this HTTP status and Text as the body.
	Status int
	// Note, when set, is recorded among the server's warnings.
	Note string
}

// DefaultAwaitTimeout is Server.AwaitTimeout unless changed.
const DefaultAwaitTimeout = 20 * time.Second

// Server is a running scripted model. Close it when done.
type Server struct {
	*httptest.Server
	// AwaitTimeout bounds how long a reply waits for the keys it awaits;
	// past it the answer goes out anyway and a warning is recorded. Set it
	// before Start.
	AwaitTimeout time.Duration
	// CacheOnArrival makes a request's prefix cacheable from its arrival
	// rather than from its answer: requests held together then hit each
	// other in arrival order. Set it before Start.
	CacheOnArrival bool
	reply          func(Request) Reply

	cache    promptcache.Cache
	mu       sync.Mutex
	next     int
	arrived  map[string]chan struct{}
	log      []promptcache.Exchange
	warnings []string
}

// New returns a server answering with reply, not yet started: set its
// fields, then call Start.
func New(reply func(Request) Reply) *Server {
	s := &Server{AwaitTimeout: DefaultAwaitTimeout, reply: reply, arrived: map[string]chan struct{}{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	return s
}

// Start starts a server answering with reply.
func Start(reply func(Request) Reply) *Server {
	s := New(reply)
	s.Start()
	return s
}

// Exchanges returns every request answered so far, in arrival order.
func (s *Server) Exchanges() []promptcache.Exchange {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.log)
	slices.SortFunc(out, func(a, b promptcache.Exchange) int { return a.Seq - b.Seq })
	return out
}

// Warnings returns what went differently from the script (an await that
// timed out, a body that was not a chat request).
func (s *Server) Warnings() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.warnings)
}

func (s *Server) warn(format string, args ...any) {
	s.mu.Lock()
	s.warnings = append(s.warnings, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

// key returns the channel closed when a request of key k arrives.
func (s *Server) key(k string) chan struct{} {
	ch, ok := s.arrived[k]
	if !ok {
		ch = make(chan struct{})
		s.arrived[k] = ch
	}
	return ch
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet { // GET /models and the like
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"deepseek-flash","object":"model","owned_by":"deepseek"}]}`)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20+1))
	if err == nil && len(body) > 64<<20 {
		err = errors.New("request body over 64 MiB")
	}
	var rendered []byte
	if err == nil {
		rendered, err = promptcache.Render(body)
	}
	req, perr := parse(body)
	if err == nil {
		err = perr
	}
	if err != nil {
		s.warn("request refused: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	req.Seq = s.next
	s.next++
	prefix := s.cache.Lookup(rendered) // the requests answered (or arrived) before this one arrived
	if s.CacheOnArrival {
		s.cache.Add(rendered)
	}
	s.mu.Unlock()

	rep := s.reply(req)
	if rep.Note != "" {
		s.warn("%s", rep.Note)
	}
	if rep.Key != "" {
		s.mu.Lock()
		ch := s.key(rep.Key)
		select {
		case <-ch:
			s.warnings = append(s.warnings, fmt.Sprintf("request %d: key %q arrived twice", req.Seq, rep.Key))
		default:
			close(ch)
		}
		s.mu.Unlock()
	}
	s.await(r, req.Seq, rep.Await)

	x := promptcache.Exchange{Seq: req.Seq, Body: body, Rendered: rendered, Prefix: prefix, Calls: rep.Calls}
	if rep.Status != 0 {
		http.Error(w, rep.Text, rep.Status)
	} else {
		stream(w, req, rep, len(rendered), promptcache.Floor(prefix))
	}
	s.mu.Lock()
	if !s.CacheOnArrival {
		s.cache.Add(rendered)
	}
	s.log = append(s.log, x)
	s.mu.Unlock()
}

// await waits until a request of every key has arrived, the client went
// away, or s.AwaitTimeout passed.
func (s *Server) await(r *http.Request, seq int, keys []string) {
	if len(keys) == 0 {
		return
	}
	timer := time.NewTimer(s.AwaitTimeout)
	defer timer.Stop()
	for _, k := range keys {
		s.mu.Lock()
		ch := s.key(k)
		s.mu.Unlock()
		select {
		case <-ch:
		case <-r.Context().Done():
			return
		case <-timer.C:
			s.warn("request %d: %q did not arrive within %s; answered without it", seq, k, s.AwaitTimeout)
			return
		}
	}
}

// parse reads what a reply function sees of a body.
func parse(body []byte) (Request, error) {
	var b struct {
		Model    string `json:"model"`
		Messages []struct {
			Role      string            `json:"role"`
			Content   json.RawMessage   `json:"content"`
			ToolCalls []json.RawMessage `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return Request{}, err
	}
	req := Request{Model: b.Model}
	for _, m := range b.Messages {
		req.Messages = append(req.Messages, Message{Role: m.Role, Text: promptcache.TextOf(m.Content), ToolCalls: len(m.ToolCalls)})
	}
	return req, nil
}

// stream writes rep as a chat-completions event stream whose usage reports
// the simulated cache hit.
func stream(w http.ResponseWriter, req Request, rep Reply, promptBytes, hitBytes int) {
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(chunk any) {
		b, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	type obj = map[string]any
	delta := func(d obj, finish any) obj {
		return obj{"id": fmt.Sprintf("scriptllm-%d", req.Seq), "object": "chat.completion.chunk", "model": req.Model,
			"choices": []obj{{"index": 0, "delta": d, "finish_reason": finish}}}
	}
	send(delta(obj{"role": "assistant", "content": ""}, nil))
	if rep.Reasoning != "" {
		send(delta(obj{"reasoning_content": rep.Reasoning}, nil))
	}
	if rep.Text != "" {
		send(delta(obj{"content": rep.Text}, nil))
	}
	finish := "stop"
	if len(rep.Calls) > 0 {
		var calls []obj
		for i, c := range rep.Calls {
			calls = append(calls, obj{"index": i, "id": fmt.Sprintf("call_%d_%d", req.Seq, i), "type": "function",
				"function": obj{"name": c.Name, "arguments": c.Arguments}})
		}
		send(delta(obj{"tool_calls": calls}, nil))
		finish = "tool_calls"
	}
	prompt, hit := promptBytes/promptcache.BytesPerToken, hitBytes/promptcache.BytesPerToken
	out := delta(obj{}, finish)
	out["usage"] = obj{"prompt_tokens": prompt, "completion_tokens": 10, "total_tokens": prompt + 10,
		"prompt_cache_hit_tokens": hit, "prompt_cache_miss_tokens": prompt - hit,
		"prompt_tokens_details": obj{"cached_tokens": hit}}
	send(out)
	fmt.Fprint(w, "data: [DONE]\n\n")
}
