package tui

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textarea"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/task"
)

// model is the screen's state. It lives on the program's event loop; what
// runs elsewhere reaches it as messages.
type model struct {
	ui        *UI
	agent     *agent.Agent // the conversation's top-level agent
	unobserve func()       // stops feeding agent's session

	st            *styles
	width, height int
	now           time.Time

	log       transcript
	follow    bool // the transcript view sticks to its end
	vp        viewport.Model
	editor    textarea.Model
	history   history
	hint      string // one line under the editor: completions, what a key does
	kids      *children
	asks      []*ask
	showThink bool
	expand    bool       // tool results show whole (ctrl+o)
	view      *childView // a child's transcript shown instead of the conversation's; nil: none
	selected  string     // the run id of the panel row Tab selected; "" when none
	inChild   bool       // this is a scratch model drawing a child's transcript
	cwd       string     // the scratch model's child's working directory
	opened    bool       // the running turn has shown its first message
	search    *search    // the reverse history search (ctrl+r) under way; nil: none
	edView    string     // the editor as last drawn, for edKey
	edKey     editorKey
	retry     *entry // the running step's retry line, updated in place
	ctxTokens int64  // the tokens of the conversation's last model call: its context
	modelName string // "route/model" the next turn runs on

	busy      bool      // the agent is running a turn
	turnStart time.Time // when the running turn started
	answer    *entry    // the running step's text, while it streams
	thinking  *entry    // the running step's reasoning, while it streams
	tools     map[string]*entry
	echoed    map[string]bool // ids of prompts already shown as sent
	spent     content.Usage   // the conversation's tokens, children included, as of the last turn or child end
	dropped   int64           // lossy events the feed dropped

	quitArmed bool  // Ctrl-C was pressed once
	quitting  bool  // the program is ending
	exitErr   error // why it ended, when not by the person
}

func newModel(u *UI, a *agent.Agent) *model {
	ed := textarea.New()
	ed.ShowLineNumbers = false
	ed.SetPromptFunc(2, func(line int) string {
		if line == 0 {
			return "› "
		}
		return "  "
	})
	ed.Placeholder = "Ask dsh… (/help lists commands; Alt+Enter for a newline)"
	ed.CharLimit, ed.MaxHeight = 0, 0
	ed.KeyMap.InsertNewline = key.NewBinding(key.WithKeys("alt+enter", "ctrl+j"))
	ed.KeyMap.TransposeCharacterBackward = key.NewBinding() // Ctrl-T folds thinking
	ed.KeyMap.DeleteCharacterForward = key.NewBinding(key.WithKeys("delete", "ctrl+d"))
	st := newStyles(u.opts.Out, os.Getenv)
	ed.FocusedStyle, ed.BlurredStyle = editorStyles(st), editorStyles(st)
	ed.Cursor.SetMode(cursor.CursorStatic)
	ed.Focus()
	m := &model{ui: u, agent: a, st: st, follow: true, editor: ed, kids: newChildren(), modelName: u.opts.Model,
		tools: map[string]*entry{}, echoed: map[string]bool{}, now: time.Now(), width: 80, height: 24}
	m.history.load(u.opts.HistoryFile)
	m.vp = viewport.New(80, 10)
	m.vp.KeyMap = viewport.KeyMap{} // the editor has the keys; the view scrolls with PgUp/PgDn
	m.unobserve = u.observe(a)
	m.log.addf(entryNote, "dsh · %s · session %s · /help lists commands", m.modelName, a.ID())
	m.log.addf(entryNote, "Working directory %s", a.Cwd())
	m.replay()
	return m
}

// replay shows what the conversation's session holds already (a resumed
// one's turns), its tokens, and lists its stored children.
func (m *model) replay() {
	events := m.agent.Session().Events()
	for _, e := range events {
		m.sessionEvent(e)
	}
	m.busy = m.agent.Status() == agent.StatusRunning
	m.refreshSpent()
	subagents, id := m.ui.opts.Runtime.Subagents, m.agent.ID()
	m.ui.async(func() any {
		rows, err := subagents.ListDescendants(context.Background(), id)
		if err != nil || len(rows) == 0 {
			return nil
		}
		return noteMsg{text: childList("Children of this session", rows)}
	})
}

// Init implements tea.Model.
func (m *model) Init() tea.Cmd { return nil }

// Update implements tea.Model.
func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	var cmd tea.Cmd
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tea.KeyMsg:
		cmd = m.key(msg)
	case batchMsg:
		m.now = time.Now()
		m.dropped = msg.dropped
		for _, item := range msg.items {
			if c := m.apply(item); c != nil {
				cmd = tea.Batch(cmd, c)
			}
		}
	case tickMsg:
		m.now = time.Time(msg)
		m.refreshChildren()
		m.refreshView()
	case endMsg:
		m.exitErr = msg.err
		return m, m.quit()
	case fmt.Stringer:
		if isNewlineKey(msg.String()) { // Shift+Enter and the like, where the terminal reports them
			m.growEditor(1)
			m.editor.InsertString("\n")
		}
	}
	m.layout()
	return m, cmd
}

// quit ends the program.
func (m *model) quit() tea.Cmd {
	m.quitting = true
	return tea.Quit
}

// apply takes one item of the feed.
func (m *model) apply(item any) tea.Cmd {
	switch it := item.(type) {
	case sessionEvent:
		if it.agent == m.agent {
			m.sessionEvent(it.e)
		}
	case agent.StatusChanged:
		if it.Agent == m.agent {
			m.busy = it.Status == agent.StatusRunning
		}
	case subagent.Started:
		subagents := m.ui.opts.Runtime.Subagents
		r := m.kids.start(it, m.agent.ID(), m.ui.opts.Runtime.Tasks.List(m.agent), func(id string) bool {
			return subagents.Residency(id) != subagent.NotResident
		}, m.now)
		how := "started"
		switch {
		case r.task != "":
			how = "started in the background as " + r.task
		case r.child != "":
			how = "started as " + r.child
		}
		m.log.add(entryChild, indent(m.depth(it.ParentID))+"↳ "+it.Provider+" · "+label(it.RunInfo)+" · "+how)
	case subagent.ProgressEvent:
		m.kids.progress(it)
	case subagent.Ended:
		if r := m.kids.end(it, m.now); r != nil {
			m.log.add(entryChild, indent(m.depth(it.ParentID))+"↳ "+r.summary(m.now))
		}
		m.refreshSpent()
	case task.Done:
		m.refreshChildren()
	case *ask:
		cwd := m.agent.Cwd()
		if sess, ok := m.ui.opts.Runtime.Sessions.Get(it.req.SessionID); ok && sess.Header().Cwd != "" {
			cwd = sess.Header().Cwd // a child's, in its worktree
		}
		it.diff = sanitize(toolDiff(it.req.Tool, string(it.req.Arguments), cwd))
		m.asks = append(m.asks, it)
	case askGone:
		for i, a := range m.asks {
			if a == it.ask {
				m.asks = append(m.asks[:i:i], m.asks[i+1:]...)
				m.log.addf(entryNote, "(the request to run %s was withdrawn: its turn ended)", it.ask.req.Tool)
				break
			}
		}
	case noteMsg:
		kind := entryNote
		if it.err {
			kind = entryError
		}
		m.log.add(kind, it.text)
	case resumedMsg:
		return m.resumed(it)
	case agentsMsg:
		m.agentsListed(it)
	case outputMsg:
		m.outputListed(it)
	}
	return nil
}

// depth is how deep under the conversation's agent the child whose
// parent is parentID sits (0 for the agent's own children).
func (m *model) depth(parentID string) int {
	parent := map[string]string{}
	for _, r := range m.kids.rows {
		parent[r.info.ChildID] = r.info.ParentID
	}
	d := 0
	for id := parentID; d <= len(parent); d++ { // bounded, whatever the ids say
		next, ok := parent[id]
		if !ok {
			break
		}
		id = next
	}
	return d
}

func indent(depth int) string { return strings.Repeat("  ", depth) }

// sessionEvent shows an event of the conversation's session.
func (m *model) sessionEvent(e session.Event) {
	switch d := e.Data.(type) {
	case session.TurnStart:
		m.turnStart, m.busy, m.opened = m.now, true, false
		m.answer, m.thinking = nil, nil
	case content.Message:
		if e.Type != session.TypeUserMessage {
			return
		}
		first := !m.opened
		m.opened = true
		switch {
		case m.echoed[d.ID]:
			delete(m.echoed, d.ID)
		case d.Source.Kind == content.SourceUser || (m.inChild && d.Source.Kind != content.SourceTool &&
			(d.Source.Form == "" || d.Source.Form == subagent.FormRelay)):
			m.log.add(entryPrompt, content.JoinText(d.Content))
		case isNotice(d.Source) && first:
			m.log.add(entryNote, "◆ a notice opened this turn: "+content.JoinText(d.Content))
		case isNotice(d.Source):
			m.log.add(entryNote, "◆ "+content.JoinText(d.Content))
		}
	case session.AssistantChunk:
		text := sanitize(d.Chunk.Text)
		if d.Chunk.Type == content.ChunkReasoningDelta {
			if m.thinking == nil {
				m.thinking = m.log.add(entryThinking, "")
				m.thinking.open = true
			}
			m.thinking.text += text
			m.log.update(m.thinking)
			return
		}
		if m.thinking != nil && m.thinking.open {
			m.thinking.open = false
			m.log.update(m.thinking)
		}
		if m.answer == nil {
			m.answer = m.log.add(entryAnswer, "")
		}
		m.answer.text += text
		m.log.update(m.answer)
	case session.AssistantMessage:
		m.retry = nil
		if u := d.Usage; u != nil && !m.inChild {
			m.ctxTokens = u.Input + u.CacheRead + u.Output
		}
		// The whole message is the truth: it heals what the feed dropped,
		// and shows a step that was not streamed (a resumed session's).
		if r := content.JoinReasoning(d.Message.Content); r != "" || m.thinking != nil {
			if m.thinking == nil {
				m.thinking = m.log.add(entryThinking, "")
			}
			m.thinking.open = false
			m.log.replace(m.thinking, sanitize(r))
		}
		if t := content.JoinText(d.Message.Content); strings.TrimSpace(t) != "" || m.answer != nil {
			if m.answer == nil {
				m.answer = m.log.add(entryAnswer, "")
			}
			m.answer.done = true
			m.log.replace(m.answer, sanitize(t))
		}
		m.answer, m.thinking = nil, nil
	case session.ToolCall:
		t := m.log.add(entryTool, toolSummary(d.Name, d.Arguments))
		t.tool, t.diff = d.Name, sanitize(toolDiff(d.Name, d.Arguments, cmp.Or(m.cwd, m.agent.Cwd())))
		m.tools[d.CallID] = t
	case session.ToolResult:
		if t := m.tools[d.Message.Source.CallID]; t != nil {
			delete(m.tools, d.Message.Source.CallID)
			out := resultText(d.Message.Content)
			if len(out) > maxToolOutput {
				out = out[:maxToolOutput] + fmt.Sprintf("\n[… %d more bytes]", len(out)-maxToolOutput)
			}
			t.output = sanitize(out)
			t.status = "ok"
			if d.Error != nil {
				t.status = d.Error.Code
			}
			m.log.update(t)
		}
	case session.LLMRetry:
		msg := ""
		if d.Failure != nil {
			msg = d.Failure.Message
		}
		of := fmt.Sprint(d.Retry)
		if d.MaxRetries > 0 {
			of = fmt.Sprintf("%d/%d", d.Retry, d.MaxRetries)
		}
		line := fmt.Sprintf("retrying in %.1fs (%s): %s", float64(d.DelayMs)/1000, of, oneLine(msg, 300))
		if m.retry == nil {
			m.retry = m.log.add(entryNote, line)
		} else {
			m.log.replace(m.retry, line)
		}
	case session.TurnEnd:
		m.answer, m.thinking, m.retry = nil, nil, nil
		for id, t := range m.tools { // calls the turn ended without a result
			t.status = "not finished"
			m.log.update(t)
			delete(m.tools, id)
		}
		if line := endLine(d); line != "" {
			m.log.add(entryError, line)
		}
		m.refreshSpent()
	}
}

// isNotice reports whether a message is a notice to the agent: a
// background task's, a child's report or settlement.
func isNotice(src content.Source) bool {
	return src.Kind == content.SourcePlugin && (src.Form == "notice" ||
		(src.Plugin == subagent.SourcePlugin && (src.Form == subagent.FormReport || src.Form == subagent.FormSettled)))
}

// endLine says how a turn ended, when it did not complete.
func endLine(end session.TurnEnd) string {
	switch end.Reason.Kind {
	case session.EndCompleted:
		return ""
	case session.EndAborted:
		if c := end.Reason.Cause; c != nil && c.Reason != "" {
			return "⏹ interrupted: " + c.Reason
		}
		return "⏹ interrupted"
	case session.EndError:
		if f := end.Reason.Error; f != nil {
			return fmt.Sprintf("✗ the turn failed: %s (%s)", f.Message, f.Code)
		}
	case session.EndMaxTokens:
		return "✗ the answer hit the max-tokens limit"
	case session.EndMaxSteps:
		return "✗ the turn stopped at its step cap (agent.maxSteps)"
	case session.EndBudget:
		return "✗ the conversation's token budget (budget.tokens) is spent"
	}
	return "✗ the turn ended " + end.Reason.Kind
}

// refreshChildren follows background tasks and the tokens of running
// children.
func (m *model) refreshChildren() {
	rt := m.ui.opts.Runtime
	m.kids.refresh(rt.Tasks.List(m.agent), func(id string) (content.Usage, bool) {
		if a, ok := rt.Agents.Get(id); ok {
			return a.Usage(), true
		}
		return content.Usage{}, false
	})
}

// refreshSpent recounts the conversation's tokens from its log.
func (m *model) refreshSpent() {
	var total content.Usage
	for _, u := range subagent.UsageFromEvents(m.agent.Session().Events()) {
		total = total.Add(u)
	}
	m.spent = total
}

// key handles a key press.
func (m *model) key(k tea.KeyMsg) tea.Cmd {
	if k.Type == tea.KeyCtrlC {
		if m.quitArmed {
			return m.quit()
		}
		m.quitArmed = true
		m.editor.Reset()
		m.hint = "Press Ctrl-C again to exit."
		running := 0
		for _, t := range m.ui.opts.Runtime.Tasks.List(m.agent) {
			if !t.Status.Terminal() {
				running++
			}
		}
		if running > 0 {
			m.hint = fmt.Sprintf("Press Ctrl-C again to exit: that stops the %d background tasks still running.", running)
		}
		return nil
	}
	if m.quitArmed {
		m.quitArmed, m.hint = false, ""
	}
	if len(m.asks) > 0 {
		m.answerAsk(k)
		return nil
	}
	if m.view != nil {
		return m.viewKey(k)
	}
	if m.search != nil {
		return m.searchKey(k)
	}
	if m.selected != "" && k.String() != "tab" && k.String() != "enter" {
		m.selected, m.hint = "", ""
	}
	switch k.String() {
	case "esc":
		m.hint = ""
		// The whole tree stops: every continuable child's running turn and
		// every one-shot background child (their notices wait for the next
		// prompt), then the root's turn.
		rt := m.ui.opts.Runtime
		n := len(rt.Subagents.InterruptTree(m.agent.ID(), "Esc")) + len(rt.Tasks.Stop(m.agent, subagenttool.TaskKind, "Esc"))
		if n > 0 && !m.busy {
			m.log.addf(entryNote, "Stopping %d background children.", n)
		}
		if m.busy {
			m.agent.Cancel(session.Cause{Kind: agent.CauseUser, Reason: "Esc"}, true)
		}
		return nil
	case "ctrl+d":
		if m.editor.Value() == "" {
			return m.quit()
		}
	case "ctrl+t":
		m.showThink = !m.showThink
		m.log.dirty = true
		return nil
	case "ctrl+o":
		m.expand = !m.expand
		m.log.dirty = true
		return nil
	case "ctrl+r":
		m.startSearch()
		return nil
	case "pgup":
		m.vp.HalfPageUp()
		m.follow = m.vp.AtBottom()
		return nil
	case "pgdown":
		m.vp.HalfPageDown()
		m.follow = m.vp.AtBottom()
		return nil
	case "tab":
		if m.editor.Value() == "" {
			m.selectNext()
			return nil
		}
		m.complete()
		return nil
	case "enter":
		if m.editor.Value() == "" && m.openSelected() {
			return nil
		}
		v := m.editor.Value()
		if strings.HasSuffix(v, `\`) && m.editor.Line() == m.editor.LineCount()-1 {
			m.setEditor(strings.TrimSuffix(v, `\`) + "\n") // a trailing backslash continues the prompt
			return nil
		}
		m.editor.Reset()
		m.hint = ""
		return m.submit(v)
	case "up":
		if m.editor.Line() == 0 && m.editor.LineInfo().RowOffset == 0 {
			if v, ok := m.history.prev(m.editor.Value()); ok {
				m.setEditor(v)
			}
			return nil
		}
	case "down":
		if m.editor.Line() == m.editor.LineCount()-1 && m.editor.LineInfo().RowOffset == m.editor.LineInfo().Height-1 {
			if v, ok := m.history.next(); ok {
				m.setEditor(v)
			}
			return nil
		}
	}
	extra := strings.Count(string(k.Runes), "\n") + strings.Count(string(k.Runes), "\r")
	if k.String() == "alt+enter" || k.String() == "ctrl+j" {
		extra++
	}
	m.growEditor(extra)
	var cmd tea.Cmd
	m.editor, cmd = m.editor.Update(k)
	return cmd
}

// isNewlineKey reports whether an input sequence the terminal library does
// not know (it prints it as "?CSI[…]?") is a modified Enter: xterm's
// modifyOtherKeys form (CSI 27;mod;13~) or the fixterms one (CSI 13;mod u).
func isNewlineKey(s string) bool {
	body, ok := strings.CutPrefix(s, "?CSI[")
	if !ok {
		return false
	}
	var seq strings.Builder
	for _, f := range strings.Fields(strings.TrimSuffix(body, "]?")) {
		var b byte
		if _, err := fmt.Sscan(f, &b); err != nil {
			return false
		}
		seq.WriteByte(b)
	}
	q := seq.String()
	return (strings.HasPrefix(q, "27;") && strings.HasSuffix(q, ";13~")) || (strings.HasPrefix(q, "13;") && strings.HasSuffix(q, "u"))
}

// answerAsk answers the oldest ask with the key pressed: y (allow once),
// a (allow the tool in the whole tree for this session), n or Esc (deny).
// Other keys wait.
func (m *model) answerAsk(k tea.KeyMsg) {
	a := m.asks[0]
	var ans permission.Answer
	var said string
	switch strings.ToLower(k.String()) {
	case "y", "1":
		ans, said = permission.AllowOnce, "allowed "+a.req.Tool+" once for "+a.req.Who()
	case "a", "2":
		ans, said = permission.AllowAlways, "allowed "+a.req.Tool+" for this session, in the whole tree (asked by "+a.req.Who()+")"
	case "n", "3", "esc":
		ans, said = permission.Reject, "denied "+a.req.Tool+" for "+a.req.Who()
	default:
		m.hint = "Answer the request first: y allows once; a allows this tool, in this tree, for this session; n denies."
		return
	}
	m.hint = ""
	m.asks = m.asks[1:]
	a.reply <- ans
	kind := entryNote
	if ans == permission.Reject {
		kind = entryError
	}
	m.log.add(kind, said)
}

// submit sends what the editor held: a slash command, or a prompt.
func (m *model) submit(v string) tea.Cmd {
	text := strings.TrimSpace(v)
	if text == "" {
		return nil
	}
	m.history.add(v)
	m.follow = true
	if strings.HasPrefix(text, "/") && !strings.HasPrefix(text, "//") {
		return m.command(text)
	}
	text = strings.TrimPrefix(text, "/") // "//x" sends "/x"
	m.kids.clearFinished()
	msg := content.UserText(text)
	m.echoed[msg.ID] = true
	e := m.log.add(entryPrompt, text)
	if err := m.agent.Followup(msg); err != nil {
		delete(m.echoed, msg.ID)
		m.log.add(entryError, "✗ not sent: "+err.Error())
		return nil
	}
	if m.busy {
		m.log.replace(e, text+"\n(queued: it runs when the current turn ends)")
	}
	return nil
}

// resumed switches the conversation to a resumed session.
func (m *model) resumed(r resumedMsg) tea.Cmd {
	if r.err != nil {
		cmd := "/resume"
		if r.fresh {
			cmd = "/clear"
		}
		m.log.add(entryError, "✗ "+cmd+": "+r.err.Error())
		return nil
	}
	old := m.agent
	m.unobserve()
	m.agent, m.busy, m.tools, m.echoed = r.agent, false, map[string]*entry{}, map[string]bool{}
	m.kids, m.view, m.selected = newChildren(), nil, ""
	if r.fresh {
		m.log = transcript{dirty: true}
		m.log.addf(entryNote, "New conversation · session %s · the previous one is kept: dsh -r %s", r.agent.ID(), old.ID())
	} else {
		m.log.addf(entryNote, "Resumed session %s; the previous conversation (%s) is closed.", r.agent.ID(), old.ID())
	}
	m.unobserve = m.ui.observe(r.agent)
	m.replay()
	m.ui.async(func() any {
		if err := old.Dispose(context.Background()); err != nil {
			return noteMsg{text: "closing the previous conversation: " + err.Error(), err: true}
		}
		return nil
	})
	return nil
}
