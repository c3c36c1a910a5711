package codex

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
)

// Message phases of an agentMessage item.
const (
	phaseFinal      = "final_answer"
	phaseCommentary = "commentary"
)

// Codex's failure category that maps to max-tokens.
const contextWindowExceeded = "contextWindowExceeded"

// turnState follows one thread's single turn from Codex's notifications and
// answers its server requests. It is the connection's handler.
type turnState struct {
	mode      string                        // permission mode
	progress  func(subagent.Progress)       // may be nil
	authorize func(permission.Request) bool // asks the parent's policy; may block

	mu        sync.Mutex
	threadID  string // once the thread exists; until then nothing is attributed
	turnID    string // once known
	cancelled bool   // the run was cancelled: approvals get "cancel"
	settled   bool   // no more progress reports
	messages  []agentMessage
	streams   []*stream // agent message deltas, in order of first delta
	usage     content.Usage
	lastError *turnError // the latest error notification

	completed chan turnInfo // the first matching turn/completed
	fault     chan string   // the first reason to fail the run on our side
}

// agentMessage is a completed agentMessage item.
type agentMessage struct {
	text  string
	phase string // "" when null or absent
}

// stream is an agent message seen only through its deltas so far.
type stream struct {
	id    string
	phase string
	text  strings.Builder
}

// turnInfo is the turn object of turn/start's answer and turn/completed.
type turnInfo struct {
	ID     string     `json:"id"`
	Status string     `json:"status"`
	Error  *turnError `json:"error"`
	Items  []wireItem `json:"items"`
}

// turnError is a TurnError.
type turnError struct {
	Message           string          `json:"message"`
	CodexErrorInfo    json.RawMessage `json:"codexErrorInfo"`
	AdditionalDetails *string         `json:"additionalDetails"`
}

// wireItem is the part of a ThreadItem the provider reads.
type wireItem struct {
	Type   string  `json:"type"`
	ID     string  `json:"id"`
	Text   string  `json:"text"`
	Phase  *string `json:"phase"`
	Status string  `json:"status"`
	Server string  `json:"server"` // mcpToolCall
	Tool   string  `json:"tool"`   // mcpToolCall, dynamicToolCall, collabAgentToolCall
}

func newTurnState(mode string, progress func(subagent.Progress), authorize func(permission.Request) bool) *turnState {
	return &turnState{mode: mode, progress: progress, authorize: authorize, completed: make(chan turnInfo, 1), fault: make(chan string, 1)}
}

func (s *turnState) setThread(id string) {
	s.mu.Lock()
	s.threadID = id
	s.mu.Unlock()
}

func (s *turnState) setTurn(id string) {
	s.mu.Lock()
	if s.turnID == "" {
		s.turnID = id
	}
	s.mu.Unlock()
}

func (s *turnState) turn() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turnID
}

func (s *turnState) markCancelled() {
	s.mu.Lock()
	s.cancelled = true
	s.mu.Unlock()
}

// settle stops progress reports.
func (s *turnState) settle() {
	s.mu.Lock()
	s.settled = true
	s.mu.Unlock()
}

func (s *turnState) fail(reason string) {
	select {
	case s.fault <- reason:
	default:
	}
}

// ours reports whether a notification about thread (and turn, when given)
// concerns our turn. Called with mu held.
func (s *turnState) ours(thread, turn string) bool {
	return s.threadID != "" && thread == s.threadID && (turn == "" || s.turnID == "" || turn == s.turnID)
}

// notify implements handler.
func (s *turnState) notify(method string, params json.RawMessage) {
	var p struct {
		ThreadID   string          `json:"threadId"`
		TurnID     string          `json:"turnId"`
		Turn       *turnInfo       `json:"turn"`
		Item       *wireItem       `json:"item"`
		ItemID     string          `json:"itemId"`
		Delta      string          `json:"delta"`
		Error      *turnError      `json:"error"`
		TokenUsage *tokenUsageInfo `json:"tokenUsage"`
	}
	if json.Unmarshal(params, &p) != nil {
		return // tolerate what we cannot read
	}
	var reports []subagent.Progress
	s.mu.Lock()
	switch method {
	case "turn/started":
		if p.Turn != nil && s.ours(p.ThreadID, "") {
			if s.turnID == "" {
				s.turnID = p.Turn.ID
			}
			reports = append(reports, subagent.Progress{Kind: subagent.ProgressTurnStart, Turn: 1})
		}
	case "item/started":
		if p.Item != nil && s.ours(p.ThreadID, p.TurnID) {
			if p.Item.Type == "agentMessage" {
				s.streamFor(p.Item.ID).phase = deref(p.Item.Phase)
			} else if name := toolName(*p.Item); name != "" {
				reports = append(reports, subagent.Progress{Kind: subagent.ProgressToolCall, Turn: 1, Tool: name, CallID: p.Item.ID})
			}
		}
	case "item/agentMessage/delta":
		if p.Delta != "" && s.ours(p.ThreadID, p.TurnID) {
			st := s.streamFor(p.ItemID)
			st.text.WriteString(p.Delta)
			if st.phase != phaseCommentary {
				reports = append(reports, subagent.Progress{Kind: subagent.ProgressText, Turn: 1, Text: p.Delta})
			}
		}
	case "item/completed":
		if p.Item != nil && s.ours(p.ThreadID, p.TurnID) {
			if p.Item.Type == "agentMessage" {
				s.messages = append(s.messages, agentMessage{text: p.Item.Text, phase: deref(p.Item.Phase)})
			} else if name := toolName(*p.Item); name != "" {
				reports = append(reports, subagent.Progress{Kind: subagent.ProgressToolResult, Turn: 1, Tool: name, CallID: p.Item.ID,
					IsError: p.Item.Status == "failed" || p.Item.Status == "declined"})
			}
		}
	case "thread/tokenUsage/updated":
		if p.TokenUsage != nil && s.ours(p.ThreadID, "") {
			s.usage = p.TokenUsage.Total.usage()
		}
	case "error":
		if p.Error != nil && s.ours(p.ThreadID, p.TurnID) {
			s.lastError = p.Error
		}
	case "turn/completed":
		if p.Turn != nil && s.ours(p.ThreadID, p.Turn.ID) {
			select {
			case s.completed <- *p.Turn:
				reports = append(reports, subagent.Progress{Kind: subagent.ProgressTurnEnd, Turn: 1, Text: p.Turn.Status})
			default:
			}
		}
	}
	report := s.progress != nil && !s.settled
	s.mu.Unlock()
	if report {
		for _, r := range reports {
			s.progress(r)
		}
	}
}

// streamFor returns the stream of item id, adding it. Called with mu held.
func (s *turnState) streamFor(id string) *stream {
	for _, st := range s.streams {
		if st.id == id {
			return st
		}
	}
	st := &stream{id: id}
	s.streams = append(s.streams, st)
	return st
}

// toolName names an item that is tool activity, or returns "".
func toolName(it wireItem) string {
	switch it.Type {
	case "commandExecution", "fileChange", "webSearch", "imageView", "imageGeneration":
		return it.Type
	case "mcpToolCall":
		if it.Server != "" {
			return it.Server + "/" + it.Tool
		}
		return it.Tool
	case "dynamicToolCall", "collabAgentToolCall":
		if it.Tool != "" {
			return it.Tool
		}
		return it.Type
	}
	return ""
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// answer selects the final answer: the latest non-blank completed agent
// message with phase final_answer, else the latest non-blank one without a
// phase. Commentary (and any other phase) never counts. When no completed
// message was reported, the items of the turn/completed turn are used.
func answer(msgs []agentMessage, items []wireItem) (string, bool) {
	if len(msgs) == 0 {
		for _, it := range items {
			if it.Type == "agentMessage" {
				msgs = append(msgs, agentMessage{text: it.Text, phase: deref(it.Phase)})
			}
		}
	}
	for _, want := range [...]string{phaseFinal, ""} {
		for i := len(msgs) - 1; i >= 0; i-- {
			if msgs[i].phase == want && strings.TrimSpace(msgs[i].text) != "" {
				return msgs[i].text, true
			}
		}
	}
	return "", false
}

// partial is the output of a run that did not complete: the answer so far,
// else the latest non-blank streamed message not known to be commentary.
func (s *turnState) partial() []content.Block {
	s.mu.Lock()
	defer s.mu.Unlock()
	if text, ok := answer(s.messages, nil); ok {
		return []content.Block{content.Text(text)}
	}
	for i := len(s.streams) - 1; i >= 0; i-- {
		st := s.streams[i]
		if (st.phase == "" || st.phase == phaseFinal) && strings.TrimSpace(st.text.String()) != "" {
			return []content.Block{content.Text(st.text.String())}
		}
	}
	return nil
}

// outcome maps a completed turn to a result (without usage).
func (s *turnState) outcome(t turnInfo) subagent.Result {
	s.mu.Lock()
	msgs := append([]agentMessage(nil), s.messages...)
	lastErr := s.lastError
	s.mu.Unlock()
	switch t.Status {
	case "completed":
		if text, ok := answer(msgs, t.Items); ok {
			return subagent.Result{StopReason: subagent.Completed, Output: []content.Block{content.Text(text)}}
		}
		return subagent.Result{StopReason: subagent.Failed, Diagnostic: "codex completed the turn without a final answer (no non-blank agent message with phase final_answer or none)"}
	case "failed", "interrupted":
		res := subagent.Result{StopReason: subagent.Failed, Output: s.partial()}
		e := t.Error
		if e == nil {
			e = lastErr
		}
		cat := category(e)
		if cat == contextWindowExceeded {
			res.StopReason = subagent.MaxTokens
		}
		res.Diagnostic = subagent.Diagnostic(describe(t.Status, cat, e))
		return res
	}
	return subagent.Result{StopReason: subagent.Failed, Output: s.partial(),
		Diagnostic: subagent.Diagnostic(fmt.Sprintf("codex ended the turn with status %q", t.Status))}
}

// category renders a codexErrorInfo: a string as is, an object by its key
// (with its HTTP status when given), absent as "unknown".
func category(e *turnError) string {
	if e == nil || len(e.CodexErrorInfo) == 0 || string(e.CodexErrorInfo) == "null" {
		return "unknown"
	}
	var s string
	if json.Unmarshal(e.CodexErrorInfo, &s) == nil {
		return s
	}
	var obj map[string]struct {
		HTTPStatusCode *int `json:"httpStatusCode"`
	}
	if json.Unmarshal(e.CodexErrorInfo, &obj) == nil && len(obj) > 0 {
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := strings.Join(keys, "+")
		if v := obj[keys[0]]; v.HTTPStatusCode != nil {
			out += fmt.Sprintf(" (HTTP %d)", *v.HTTPStatusCode)
		}
		return out
	}
	return quote(e.CodexErrorInfo)
}

// describe is the diagnostic of a failed or interrupted turn.
func describe(status, cat string, e *turnError) string {
	msg := fmt.Sprintf("codex turn %s (category %s)", status, cat)
	if e != nil {
		if e.Message != "" {
			msg += ": " + e.Message
		}
		if e.AdditionalDetails != nil && *e.AdditionalDetails != "" {
			msg += "; " + *e.AdditionalDetails
		}
	}
	return msg
}

// tokenUsageInfo is a ThreadTokenUsage.
type tokenUsageInfo struct {
	Total tokenBreakdown `json:"total"`
}

// tokenBreakdown is a TokenUsageBreakdown: input includes cached input,
// output includes reasoning.
type tokenBreakdown struct {
	Input      int64 `json:"inputTokens"`
	Cached     int64 `json:"cachedInputTokens"`
	CacheWrite int64 `json:"cacheWriteInputTokens"`
	Output     int64 `json:"outputTokens"`
	Reasoning  int64 `json:"reasoningOutputTokens"`
}

// usage converts to dsh's disjoint counts (Input excludes CacheRead).
func (b tokenBreakdown) usage() content.Usage {
	return content.Usage{Input: max(b.Input-b.Cached, 0), CacheRead: b.Cached, CacheWrite: b.CacheWrite,
		Output: b.Output, Reasoning: b.Reasoning}
}

// totalUsage is the thread's latest cumulative usage.
func (s *turnState) totalUsage() content.Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usage
}
