package promptcache

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Exchange is one request of a run and the answer it got.
type Exchange struct {
	Seq      int    // arrival order, from 0
	Body     []byte // the request body as sent
	Rendered []byte // Render(Body)
	Prefix   int    // longest common prefix, in bytes, with a request answered before this one arrived
	Calls    []Call // the tool calls of the answer
}

// Call is a tool call an answer made.
type Call struct {
	Name      string
	Arguments string // JSON
}

// Report is what a run's requests cost under the simulated cache.
type Report struct {
	Requests    int     `json:"requests"`
	InputTokens float64 `json:"input_tokens"`
	HitTokens   float64 `json:"hit_tokens"`
	HitShare    float64 `json:"hit_share"`     // HitTokens / InputTokens
	Cost        float64 `json:"cost"`          // full-price token equivalents: a hit costs HitPrice, a miss 1
	CostNoCache float64 `json:"cost_no_cache"` // = InputTokens
	// Continuations are the requests that are neither the run's first nor a
	// child's first; AppendOnly of them extend an earlier request byte for
	// byte (within a session, every one should).
	Continuations int     `json:"continuations"`
	AppendOnly    int     `json:"append_only"`
	Children      []Child `json:"children"`
}

// Child is one delegation: a subagent* tool call and the child's first
// request.
type Child struct {
	Tool        string  `json:"tool"`
	Description string  `json:"description"`
	Parent      int     `json:"parent_request"` // Seq of the request whose answer made the call
	First       int     `json:"first_request"`  // Seq of the child's first request; -1 when none carried the prompt
	FirstTokens float64 `json:"first_request_tokens"`
	// ParentShare is the share of the first request's bytes that are a
	// byte prefix of the parent request.
	ParentShare float64 `json:"parent_prefix_share"`
	// FirstHitShare is the share of the first request's tokens that are
	// cache hits.
	FirstHitShare float64 `json:"first_request_hit_share"`
}

// IsDelegation reports whether a tool name is one of the subagent tools
// (subagent, subagent_fork, …).
func IsDelegation(name string) bool { return strings.HasPrefix(name, "subagent") }

// Analyze prices the exchanges (in Seq order) and finds every child's first
// request: the first later request with a user message that carries the
// prompt of a subagent* call.
func Analyze(xs []Exchange) Report {
	var r Report
	r.Requests = len(xs)
	firsts := map[int]bool{}
	for _, x := range xs {
		hit := Floor(x.Prefix)
		r.InputTokens += Tokens(len(x.Rendered))
		r.HitTokens += Tokens(hit)
		r.Cost += HitPrice*Tokens(hit) + Tokens(len(x.Rendered)-hit)
		for _, c := range x.Calls {
			if !IsDelegation(c.Name) {
				continue
			}
			var args struct {
				Description string `json:"description"`
				Prompt      string `json:"prompt"`
			}
			_ = json.Unmarshal([]byte(c.Arguments), &args)
			ch := Child{Tool: c.Name, Description: args.Description, Parent: x.Seq, First: -1}
			for _, y := range xs {
				if y.Seq <= x.Seq || args.Prompt == "" || !userCarries(y.Body, args.Prompt) {
					continue
				}
				ch.First, firsts[y.Seq] = y.Seq, true
				ch.FirstTokens = Tokens(len(y.Rendered))
				if len(y.Rendered) > 0 {
					ch.ParentShare = float64(CommonPrefix(y.Rendered, x.Rendered)) / float64(len(y.Rendered))
					ch.FirstHitShare = float64(Floor(y.Prefix)) / float64(len(y.Rendered))
				}
				break
			}
			r.Children = append(r.Children, ch)
		}
	}
	r.CostNoCache = r.InputTokens
	if r.InputTokens > 0 {
		r.HitShare = r.HitTokens / r.InputTokens
	}
	for i, x := range xs {
		if i == 0 || firsts[x.Seq] {
			continue
		}
		r.Continuations++
		for _, y := range xs[:i] {
			if bytes.HasPrefix(x.Rendered, y.Rendered) {
				r.AppendOnly++
				break
			}
		}
	}
	return r
}

// Add sums reports (children are concatenated).
func (r Report) Add(o Report) Report {
	r.Requests += o.Requests
	r.InputTokens += o.InputTokens
	r.HitTokens += o.HitTokens
	r.Cost += o.Cost
	r.CostNoCache += o.CostNoCache
	r.Continuations += o.Continuations
	r.AppendOnly += o.AppendOnly
	r.Children = append(r.Children, o.Children...)
	r.HitShare = 0
	if r.InputTokens > 0 {
		r.HitShare = r.HitTokens / r.InputTokens
	}
	return r
}

// userCarries reports whether a user message of the request body contains
// text (in string content or in text parts).
func userCarries(body []byte, text string) bool {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return false
	}
	for _, m := range req.Messages {
		if m.Role == "user" && strings.Contains(TextOf(m.Content), text) {
			return true
		}
	}
	return false
}

// TextOf returns the text of a message content: a string, or the text of
// every part of an array of parts.
func TextOf(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(content, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}
