package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/mcptool"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
)

// output renders a run for its reader: a person at a terminal, or a script
// (--json). Its methods are safe for concurrent use: session events arrive
// on the agent's goroutine, child events on the children's.
type output interface {
	// session shows the run's session before anything else.
	session(id, cwd string)
	// event renders an event of the top-level session.
	event(e session.Event)
	// child renders a child run's event from the runtime's bus.
	child(e event.Event)
	// finish ends what is half-written (a partial line).
	finish()
	// result renders how the run ended, and what it spent.
	result(r runResult)
}

// runResult is how a run ended.
type runResult struct {
	SessionID string
	Answer    string // the text of the last turn's last model message
	Status    string // completed, or how it did not: a turn's end reason, "interrupted", "error"
	Err       error  // nil when the run completed
	Usage     map[string]content.Usage
	Line      string // the human summary of Usage (with its cost)
	CostUSD   float64
	Priced    bool
}

// humanOutput writes the answer to out as it streams, and the model's
// reasoning, tool activity, retries and child runs to info; children as an
// indented tree, each end line saying why it ended. A partial line of the
// answer is ended before anything is written to info. quiet keeps info to
// the last line.
type humanOutput struct {
	out, info io.Writer
	quiet     bool
	broken    func(error) // called at the first failed write to out

	mu       sync.Mutex
	midLine  bool // out has a partial line
	thinking bool // info has a partial line of reasoning
	failed   bool // a write to out failed
	depth    map[string]int
	start    map[string]time.Time
}

func newHumanOutput(out, info io.Writer, quiet bool, broken func(error)) *humanOutput {
	return &humanOutput{out: out, info: info, quiet: quiet, broken: broken, depth: map[string]int{}, start: map[string]time.Time{}}
}

func (h *humanOutput) session(string, string) {}

// print writes s to out; after a failed write it writes nothing more.
func (h *humanOutput) print(s string) {
	if h.failed {
		return
	}
	if _, err := io.WriteString(h.out, s); err != nil {
		h.failed = true
		if h.broken != nil {
			h.broken(err)
		}
	}
}

// say writes a line to info, after ending partial lines. h.mu is held.
func (h *humanOutput) say(format string, args ...any) {
	if h.quiet {
		return
	}
	h.endLines()
	fmt.Fprintf(h.info, format+"\n", args...)
}

// endLines ends a partial line of reasoning or of the answer. h.mu is held.
func (h *humanOutput) endLines() {
	if h.thinking {
		fmt.Fprintln(h.info)
		h.thinking = false
	}
	if h.midLine {
		h.print("\n")
		h.midLine = false
	}
}

func (h *humanOutput) finish() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.endLines()
}

func (h *humanOutput) event(e session.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch d := e.Data.(type) {
	case session.AssistantChunk:
		switch {
		case d.Chunk.Type == content.ChunkReasoningDelta && d.Chunk.Text != "" && !h.quiet:
			if h.midLine {
				h.print("\n")
				h.midLine = false
			}
			if !h.thinking {
				fmt.Fprint(h.info, "thinking: ")
				h.thinking = true
			}
			fmt.Fprint(h.info, d.Chunk.Text)
		case d.Chunk.Type == content.ChunkTextDelta && d.Chunk.Text != "":
			if h.thinking {
				fmt.Fprintln(h.info)
				h.thinking = false
			}
			h.print(d.Chunk.Text)
			h.midLine = !strings.HasSuffix(d.Chunk.Text, "\n")
		}
	case session.ToolCall:
		h.say("→ %s %s", d.Name, clip(d.Arguments, 200))
	case session.ToolResult:
		status := "ok"
		if d.Error != nil {
			status = "error " + d.Error.Code
		}
		h.say("← %s (%d bytes)", status, len(resultText(d)))
	case session.LLMRetry:
		msg := ""
		if d.Failure != nil {
			msg = d.Failure.Message
		}
		h.say("retrying in %.1fs (%s): %s", float64(d.DelayMs)/1000, attempts(d), clip(msg, 300))
	case session.Compaction:
		h.say("compacted the conversation (%s): %d messages summarised, %d kept", d.Trigger, d.Compacted, d.Kept)
	case session.AssistantMessage:
		h.endLines()
	}
}

// attempts renders "2/5" (or "2" when the maximum is unknown).
func attempts(r session.LLMRetry) string {
	if r.MaxRetries > 0 {
		return fmt.Sprintf("%d/%d", r.Retry, r.MaxRetries)
	}
	return fmt.Sprint(r.Retry)
}

func (h *humanOutput) child(e event.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch e := e.(type) {
	case subagent.Started:
		d := h.depth[e.ParentID] + 1
		h.depth[e.ChildID] = d
		h.start[e.RunID] = time.Now()
		h.say("%s↳ %s · %s · started", indent(d), e.Provider, label(e.RunInfo))
	case subagent.ProgressEvent:
		if e.Kind == subagent.ProgressToolCall {
			h.say("%s· %s · %s", indent(h.depth[e.ChildID]+1), label(e.RunInfo), e.Tool)
		}
	case mcptool.Progress:
		done := fmt.Sprint(e.Progress)
		if e.Total > 0 {
			done += fmt.Sprintf("/%v", e.Total)
		}
		h.say("%s· %s %s %s", indent(h.depth[e.AgentID]+1), e.Tool, done, clip(e.Message, 120))
	case mcptool.Unavailable:
		h.endLines()
		fmt.Fprintf(h.info, "dsh: warning: MCP server %s is unavailable: %s (retried on a call in %s or later)\n", e.Server,
			clip(e.Err, 400), e.RetryIn)
	case subagent.Ended:
		elapsed := time.Since(h.start[e.RunID]).Round(time.Millisecond)
		var u content.Usage
		for _, m := range e.Usage {
			u = u.Add(m)
		}
		cost := ""
		if e.CostUSD > 0 {
			cost = fmt.Sprintf(" · $%.4f", e.CostUSD)
		}
		why := ""
		if e.StopReason != subagent.Completed && e.Diagnostic != "" {
			why = ": " + clip(firstLine(e.Diagnostic), 200)
		}
		h.say("%s↳ %s · %s · %s%s in %s · tokens %s%s", indent(h.depth[e.ChildID]), e.Provider, label(e.RunInfo), e.StopReason, why,
			elapsed, u, cost)
		delete(h.start, e.RunID)
	}
}

func (h *humanOutput) result(r runResult) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.endLines()
	fmt.Fprintf(h.info, "[session %s · %s, children included]\n", r.SessionID, r.Line)
}

func indent(depth int) string { return strings.Repeat("  ", depth) }

func label(info subagent.RunInfo) string {
	if info.Label != "" {
		return info.Label
	}
	return info.ChildID
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func resultText(d session.ToolResult) string {
	if len(d.Message.Content) == 1 {
		return content.JoinText(d.Message.Content[0].Content)
	}
	return ""
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// jsonOutput writes one JSON object per line to out for every event a
// script needs; the field names are stable (see the README's `--json`
// section). Nothing goes to stderr but errors.
type jsonOutput struct {
	mu         sync.Mutex
	enc        *json.Encoder
	broken     func(error)
	failed     bool
	resultOnly bool // only the result line (--output-format json)
}

func newJSONOutput(out io.Writer, broken func(error)) *jsonOutput {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	return &jsonOutput{enc: enc, broken: broken}
}

// jsonLine is one line of --json output; Type says which fields are set.
type jsonLine struct {
	Type       string                   `json:"type"`
	SessionID  string                   `json:"session_id,omitempty"`
	Cwd        string                   `json:"cwd,omitempty"`
	Turn       int                      `json:"turn,omitempty"`
	Text       string                   `json:"text,omitempty"`
	ID         string                   `json:"id,omitempty"`
	Name       string                   `json:"name,omitempty"`
	Arguments  json.RawMessage          `json:"arguments,omitempty"`
	OK         *bool                    `json:"ok,omitempty"`
	Output     *string                  `json:"output,omitempty"`
	Truncated  bool                     `json:"truncated,omitempty"`
	Code       string                   `json:"code,omitempty"`
	Bytes      *int                     `json:"bytes,omitempty"`
	Attempt    int                      `json:"attempt,omitempty"`
	Max        int                      `json:"max,omitempty"`
	DelayMs    int64                    `json:"delay_ms,omitempty"`
	Reason     string                   `json:"reason,omitempty"`
	Error      string                   `json:"error,omitempty"`
	Server     string                   `json:"server,omitempty"`
	RunID      string                   `json:"run_id,omitempty"`
	ChildID    string                   `json:"child_id,omitempty"`
	ParentID   string                   `json:"parent_id,omitempty"`
	Provider   string                   `json:"provider,omitempty"`
	Label      string                   `json:"label,omitempty"`
	Kind       string                   `json:"kind,omitempty"`
	Tool       string                   `json:"tool,omitempty"`
	Progress   *float64                 `json:"progress,omitempty"`
	Of         float64                  `json:"of,omitempty"`
	Level      string                   `json:"level,omitempty"`
	Logger     string                   `json:"logger,omitempty"`
	CallID     string                   `json:"call_id,omitempty"`
	StopReason string                   `json:"stop_reason,omitempty"`
	Diagnostic string                   `json:"diagnostic,omitempty"`
	Usage      map[string]content.Usage `json:"usage,omitempty"`
	Total      *content.Usage           `json:"total,omitempty"`
	CostUSD    *float64                 `json:"cost_usd,omitempty"`
}

func (j *jsonOutput) write(l jsonLine) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failed || j.resultOnly && l.Type != "result" {
		return
	}
	if err := j.enc.Encode(l); err != nil {
		j.failed = true
		if j.broken != nil {
			j.broken(err)
		}
	}
}

func (j *jsonOutput) session(id, cwd string) {
	j.write(jsonLine{Type: "session", SessionID: id, Cwd: cwd})
}

func (j *jsonOutput) finish() {}

func (j *jsonOutput) event(e session.Event) {
	switch d := e.Data.(type) {
	case session.TurnStart:
		j.write(jsonLine{Type: "turn_start", Turn: d.Turn})
	case session.AssistantChunk:
		switch {
		case d.Chunk.Type == content.ChunkTextDelta && d.Chunk.Text != "":
			j.write(jsonLine{Type: "text", Text: d.Chunk.Text})
		case d.Chunk.Type == content.ChunkReasoningDelta && d.Chunk.Text != "":
			j.write(jsonLine{Type: "reasoning", Text: d.Chunk.Text})
		}
	case session.ToolCall:
		args := json.RawMessage(d.Arguments)
		if !json.Valid(args) {
			args, _ = json.Marshal(d.Arguments)
		}
		j.write(jsonLine{Type: "tool_call", ID: d.CallID, Name: d.Name, Arguments: args})
	case session.ToolResult:
		text := resultText(d)
		ok, n := d.Error == nil, len(text)
		l := jsonLine{Type: "tool_result", ID: d.Message.Source.CallID, OK: &ok, Bytes: &n}
		out, truncated := capText(text, maxJSONOutput)
		l.Output, l.Truncated = &out, truncated
		if d.Error != nil {
			l.Code = d.Error.Code
		}
		j.write(l)
	case session.LLMRetry:
		l := jsonLine{Type: "retry", Attempt: d.Retry, Max: d.MaxRetries, DelayMs: d.DelayMs}
		if d.Failure != nil {
			l.Code, l.Error = d.Failure.Code, d.Failure.Message
		}
		j.write(l)
	case session.Compaction:
		j.write(jsonLine{Type: "compaction", Turn: d.Turn, Kind: d.Trigger})
	case session.TurnEnd:
		l := jsonLine{Type: "turn_end", Turn: d.Turn, Reason: d.Reason.Kind}
		if f := d.Reason.Error; f != nil {
			l.Code, l.Error = f.Code, f.Message
		}
		j.write(l)
	}
}

func (j *jsonOutput) child(e event.Event) {
	switch e := e.(type) {
	case subagent.Started:
		j.write(jsonLine{Type: "child_start", RunID: e.RunID, ChildID: e.ChildID, ParentID: e.ParentID, Provider: e.Provider, Label: e.Label})
	case subagent.ProgressEvent:
		l := jsonLine{Type: "child_progress", RunID: e.RunID, ChildID: e.ChildID, ParentID: e.ParentID, Provider: e.Provider,
			Label: e.Label, Kind: string(e.Kind), Tool: e.Tool, CallID: e.CallID, Turn: e.Turn}
		switch e.Kind {
		case subagent.ProgressText:
			if e.Text == "" {
				return
			}
			l.Text = e.Text
		case subagent.ProgressTurnEnd:
			l.Reason = e.Text
		case subagent.ProgressToolResult:
			ok := !e.IsError
			l.OK = &ok
		}
		j.write(l)
	case mcptool.Unavailable:
		j.write(jsonLine{Type: "mcp_unavailable", Server: e.Server, Error: e.Err, DelayMs: e.RetryIn.Milliseconds()})
	case mcptool.Progress:
		j.write(jsonLine{Type: "mcp_progress", Server: e.Server, Tool: e.Tool, ID: e.CallID, Progress: &e.Progress, Of: e.Total, Text: e.Message})
	case mcptool.Log:
		j.write(jsonLine{Type: "mcp_log", Server: e.Server, Level: e.Level, Logger: e.Logger, Text: e.Message})
	case subagent.Ended:
		l := jsonLine{Type: "child_end", RunID: e.RunID, ChildID: e.ChildID, ParentID: e.ParentID, Provider: e.Provider, Label: e.Label,
			StopReason: string(e.StopReason), Diagnostic: e.Diagnostic, Usage: e.Usage}
		l.Text, l.Truncated = capText(content.JoinText(e.LastAssistantMessage), maxJSONOutput)
		if e.CostUSD > 0 {
			l.CostUSD = &e.CostUSD
		}
		j.write(l)
	}
}

func (j *jsonOutput) result(r runResult) {
	var total content.Usage
	for _, u := range r.Usage {
		total = total.Add(u)
	}
	l := jsonLine{Type: "result", SessionID: r.SessionID, StopReason: r.Status, Text: r.Answer, Usage: r.Usage, Total: &total}
	if r.Err != nil {
		l.Code, l.Error = errorCode(r.Err), r.Err.Error()
	}
	if r.Priced {
		l.CostUSD = &r.CostUSD
	}
	j.write(l)
}

// maxJSONOutput bounds the text of one --json line's output (a tool's
// result, a child's answer); its bytes field says how long it was.
const maxJSONOutput = 16 << 10

// capText cuts s to at most n bytes, at a rune boundary, and says whether
// it did.
func capText(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

// watch subscribes out to child runs on bus; stop undoes it.
func watch(bus *event.Bus, out output) (stop func()) { return bus.Subscribe(out.child) }
