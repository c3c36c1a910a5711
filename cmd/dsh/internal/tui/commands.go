package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/prompt/instructions"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/task"
)

// command is a slash command.
type command struct {
	name string // without the slash
	args string // what it takes, for /help; "" when nothing
	help string
	run  func(m *model, arg string) tea.Cmd
}

// commands are the slash commands, in the order /help lists them. It is a
// function, not a table, so that nothing is built before the UI runs.
func commands() []command {
	return []command{
		{"tasks", "", "list the background tasks and continuable children of this conversation", (*model).tasks},
		{"output", "ID", "show a background task's output or a child's last answer (reading a task takes it off the panel)", (*model).output},
		{"kill", "ID", "stop a background task and its child, or a continuable child's turn, with everything it runs", (*model).kill},
		{"agents", "[N]", "list this conversation's children; /agents N (or an id) opens one's transcript, Esc returns", (*model).agents},
		{"clear", "", "start a new conversation (also /new); this one is kept, for dsh -r ID", (*model).clear},
		{"new", "", "the same as /clear", (*model).clear},
		{"model", "[ROUTE]", "the model this conversation runs on; /model ROUTE switches the next turn to a configured route", (*model).modelCmd},
		{"permissions", "", "what asks and what is denied, and what an a answer allows", (*model).permissions},
		{"mcp", "", "the MCP servers and the tools they give", (*model).mcp},
		{"sessions", "", "list the stored sessions of this directory", (*model).sessions},
		{"resume", "ID", "continue a stored session here", (*model).resume},
		{"cost", "", "the tokens and cost of this conversation, children included", (*model).cost},
		{"compact", "[FOCUS]", "summarise the conversation so far to free the model's context (FOCUS: what to keep)", (*model).compact},
		{"init", "", "write a first AGENTS.md here (never overwrites one)", func(m *model, _ string) tea.Cmd {
			m.log.add(entryNote, instructions.InitReport(m.agent.Cwd()))
			return nil
		}},
		{"help", "", "this list, and the keys", (*model).help},
		{"exit", "", "leave (the session is kept: dsh -r ID continues it)", func(m *model, _ string) tea.Cmd { return m.quit() }},
	}
}

// command runs a slash command line.
func (m *model) command(line string) tea.Cmd {
	name, arg, _ := strings.Cut(strings.TrimPrefix(line, "/"), " ")
	arg = strings.TrimSpace(arg)
	m.log.add(entryPrompt, line)
	for _, c := range commands() {
		if c.name == name {
			if c.args != "" && !strings.HasPrefix(c.args, "[") && arg == "" { // [ARG] is optional
				m.log.addf(entryError, "/%s needs %s: /%s %s", c.name, strings.ToLower(c.args), c.name, c.args)
				return nil
			}
			return c.run(m, arg)
		}
	}
	m.log.addf(entryError, "unknown command %s: /help lists them (start a prompt with // to send a slash)", oneLine("/"+name, 40))
	return nil
}

func (m *model) tasks(string) tea.Cmd {
	list := m.ui.opts.Runtime.Tasks.List(m.agent)
	var kids []*childRow
	for _, r := range m.kids.rows {
		if r.child != "" {
			kids = append(kids, r)
		}
	}
	if len(list) == 0 && len(kids) == 0 {
		m.log.add(entryNote, "No background tasks.")
		return nil
	}
	var b strings.Builder
	if len(kids) > 0 {
		b.WriteString("Continuable children (/output ID reads the last answer, /agents opens the transcript, /kill ID stops):")
		for _, r := range kids {
			b.WriteString("\n  " + r.summary(m.now))
		}
		if len(list) == 0 {
			m.log.add(entryNote, b.String())
			return nil
		}
		b.WriteString("\n")
	}
	b.WriteString("Background tasks:")
	for _, t := range list {
		took := m.now.Sub(t.StartedAt)
		if !t.FinishedAt.IsZero() {
			took = t.FinishedAt.Sub(t.StartedAt)
		}
		fmt.Fprintf(&b, "\n  %s · %s · %s %s", t.ID, t.Label, t.Status, elapsed(took))
		if t.Detail != "" {
			b.WriteString(": " + t.Detail)
		}
		if t.Status.Terminal() && !t.Reported {
			b.WriteString(" (unread: /output " + t.ID + ")")
		}
	}
	m.log.add(entryNote, b.String())
	return nil
}

// maxOutput bounds the task output /output shows.
const maxOutput = 32 << 10

func (m *model) output(id string) tea.Cmd {
	if r := m.kids.byChild(id); r != nil {
		m.childOutput(r.info.ChildID, r.summary(m.now))
		return nil
	}
	out, snap, err := m.ui.opts.Runtime.Tasks.Read(id, m.agent)
	switch {
	case err != nil && len(id) >= 4:
		// Not a task: perhaps a child the panel no longer shows (one of a
		// resumed conversation, or one that ended).
		subagents, root, taskErr := m.ui.opts.Runtime.Subagents, m.agent.ID(), err.Error()
		m.ui.async(func() any {
			rows, _ := subagents.ListDescendants(context.Background(), root)
			return outputMsg{rows: rows, id: id, taskErr: taskErr}
		})
	case err != nil:
		m.log.add(entryError, "✗ "+err.Error())
	case !snap.Status.Terminal():
		m.log.addf(entryNote, "%s is still %s (%s): /kill %s stops it", id, snap.Status, elapsed(m.now.Sub(snap.StartedAt)), id)
	default:
		text := out.Output
		if len(text) > maxOutput {
			text = text[:maxOutput] + fmt.Sprintf("\n[… %d more bytes]", len(text)-maxOutput)
		}
		head := fmt.Sprintf("%s %s", id, snap.Status)
		if snap.Detail != "" {
			head += ": " + snap.Detail
		}
		if strings.TrimSpace(text) == "" {
			text = "(no output)"
		}
		m.log.add(entryNote, head+"\n"+text)
	}
	m.refreshChildren()
	return nil
}

// outputMsg is the listing /output looks a child up in, when its id is
// no task's.
type outputMsg struct {
	rows    []subagent.ChildRow
	id      string
	taskErr string // why it is no task
}

// outputListed shows the last answer of the child o.id names, or why none.
func (m *model) outputListed(o outputMsg) {
	var match []subagent.ChildRow
	for _, r := range o.rows {
		if strings.HasPrefix(r.ID, o.id) {
			match = append(match, r)
		}
	}
	switch len(match) {
	case 0:
		m.log.add(entryError, "✗ "+o.taskErr)
	case 1:
		m.childOutput(match[0].ID, childRowLine(match[0]))
	default:
		m.log.addf(entryError, "✗ /output: %s names %d children: give more of the id", oneLine(o.id, 40), len(match))
	}
}

// childOutput shows a child's state (head) and its last answer.
func (m *model) childOutput(childID, head string) {
	_, events, err := m.ui.opts.Runtime.Sessions.Read(childID)
	if err != nil {
		m.log.add(entryError, "✗ /output: "+err.Error())
		return
	}
	text := ""
	for i := len(events) - 1; i >= 0 && text == ""; i-- {
		if d, ok := events[i].Data.(session.AssistantMessage); ok {
			text = strings.TrimSpace(content.JoinText(d.Message.Content))
		}
	}
	if len(text) > maxOutput {
		text = text[:maxOutput] + fmt.Sprintf("\n[… %d more bytes]", len(text)-maxOutput)
	}
	if text == "" {
		text = "(no answer yet)"
	}
	m.log.add(entryNote, head+"\n"+text+"\n(/agents opens its whole transcript)")
}

func (m *model) kill(id string) tea.Cmd {
	if r := m.kids.byHandle(strings.TrimSpace(id)); r != nil { // a continuable child: its turn ends
		// With the user's authority: the child and everything below it.
		if len(m.ui.opts.Runtime.Subagents.InterruptChildren([]string{r.info.ChildID}, "/kill")) == 0 {
			m.log.addf(entryNote, "%s is not running.", r.child)
		} else {
			m.log.addf(entryNote, "Stopping %s.", r.child)
		}
		return nil
	}
	finished, snap, err := m.ui.opts.Runtime.Tasks.Kill(id, m.agent, "killed by the user")
	switch {
	case err != nil:
		m.log.add(entryError, "✗ "+err.Error())
	case finished:
		m.log.addf(entryNote, "%s had already finished: %s", id, snap.Status)
	default:
		m.log.addf(entryNote, "Stopping %s.", id)
	}
	m.refreshChildren()
	return nil
}

func (m *model) sessions(string) tea.Cmd {
	list := m.ui.opts.Sessions
	if list == nil {
		m.log.add(entryError, "/sessions is not available here")
		return nil
	}
	m.ui.async(func() any {
		text, err := list()
		if err != nil {
			return noteMsg{text: "✗ /sessions: " + err.Error(), err: true}
		}
		return noteMsg{text: strings.TrimRight(text, "\n")}
	})
	return nil
}

func (m *model) resume(id string) tea.Cmd {
	r := m.ui.opts.Resume
	if r == nil {
		m.log.add(entryError, "/resume is not available here: `dsh run --resume "+oneLine(id, 40)+"` continues the session.")
		return nil
	}
	if m.busy {
		m.log.add(entryError, "/resume waits for the running turn: Esc interrupts it")
		return nil
	}
	u := m.ui
	u.async(func() any {
		a, err := r.Resume(context.Background(), id, u.asker)
		select {
		case <-u.done: // the UI ended meanwhile
			if a != nil {
				a.Dispose(context.Background())
			}
			return nil
		default:
			return resumedMsg{agent: a, err: err}
		}
	})
	m.log.addf(entryNote, "Resuming %s…", oneLine(id, 40))
	return nil
}

// compact summarises the conversation by hand (agent.Compact); the agent
// shows as running meanwhile, so Esc stops it.
func (m *model) compact(focus string) tea.Cmd {
	if m.busy {
		m.log.add(entryError, "/compact waits for the running turn: Esc interrupts it")
		return nil
	}
	a, u := m.agent, m.ui
	u.async(func() any {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-u.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		c, err := a.Compact(ctx, focus)
		if err != nil {
			return noteMsg{text: "✗ /compact: " + err.Error(), err: true}
		}
		return noteMsg{text: fmt.Sprintf("Compacted: %d messages summarised, %d kept as they were. The model goes on from its summary:\n%s",
			c.Compacted, c.Kept, content.JoinText(c.Summary.Content))}
	})
	m.log.add(entryNote, "Compacting the conversation…")
	return nil
}

// clear starts a new conversation; this one stays stored.
func (m *model) clear(string) tea.Cmd {
	r := m.ui.opts.Resume
	if r == nil {
		m.log.add(entryError, "/clear is not available here")
		return nil
	}
	if m.busy {
		m.log.add(entryError, "/clear waits for the running turn: Esc interrupts it")
		return nil
	}
	u := m.ui
	u.async(func() any {
		a, err := r.New(context.Background(), u.asker)
		select {
		case <-u.done:
			if a != nil {
				a.Dispose(context.Background())
			}
			return nil
		default:
			return resumedMsg{agent: a, err: err, fresh: true}
		}
	})
	return nil
}

func (m *model) cost(string) tea.Cmd {
	usage := subagent.UsageFromEvents(m.agent.Session().Events())
	if len(usage) == 0 {
		m.log.add(entryNote, "Nothing spent yet.")
		return nil
	}
	var line string
	if m.ui.opts.Spent != nil {
		line = m.ui.opts.Spent(usage)
	} else {
		m.refreshSpent()
		line = "tokens " + m.spent.String()
	}
	var b strings.Builder
	b.WriteString(line + ", children included")
	keys := make([]string, 0, len(usage))
	for k := range usage {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %s: %s", k, usage[k])
	}
	m.log.add(entryNote, b.String())
	return nil
}

func (m *model) modelCmd(arg string) tea.Cmd {
	routes := m.ui.opts.Routes
	if arg == "" {
		text := "Model: " + m.modelName
		if len(routes) > 0 {
			text += "\nConfigured routes: " + strings.Join(routes, ", ") + "\n/model ROUTE switches the next turn to one"
		}
		m.log.add(entryNote, text)
		return nil
	}
	route, model, _ := strings.Cut(arg, "/")
	if !slices.Contains(routes, route) {
		m.log.addf(entryError, "✗ /model: no route %s; the configured routes: %s", oneLine(route, 40), strings.Join(routes, ", "))
		return nil
	}
	if model == "" && m.ui.opts.ModelOf != nil {
		model = m.ui.opts.ModelOf(route)
	}
	m.agent.SetRoute(route, model)
	m.modelName = route + "/" + model
	when := "the next turn runs"
	if m.busy {
		when = "the running turn's next model call runs"
	}
	m.log.addf(entryNote, "Model: %s (%s on it)", m.modelName, when)
	return nil
}

func (m *model) permissions(string) tea.Cmd {
	text := m.ui.opts.Permissions
	if text == "" {
		text = "Every tool runs without asking (no permission policy)."
	}
	m.log.add(entryNote, text+"\nAn a answer allows that tool in the whole tree until you leave; y allows one call.")
	return nil
}

func (m *model) mcp(string) tea.Cmd {
	servers := m.ui.opts.MCP
	if len(servers) == 0 {
		m.log.add(entryNote, "No MCP servers configured (mcpServers in dsh.yaml, or a trusted project's .mcp.json).")
		return nil
	}
	count := map[string]int{}
	for _, spec := range m.agent.Tools().Specs() {
		if rest, ok := strings.CutPrefix(spec.Name, "mcp__"); ok {
			server, _, _ := strings.Cut(rest, "__")
			count[server]++
		}
	}
	var b strings.Builder
	b.WriteString("MCP servers:")
	for _, line := range servers {
		name, _, _ := strings.Cut(line, " ")
		tools := fmt.Sprintf("%d tools", count[name])
		if count[name] == 0 {
			tools = "no tools (not started, or failed: see dsh doctor and the log)"
		}
		fmt.Fprintf(&b, "\n  %s · %s", line, tools)
	}
	m.log.add(entryNote, b.String())
	return nil
}

func (m *model) help(string) tea.Cmd {
	var b strings.Builder
	b.WriteString("Commands (a menu shows them as you type /; Tab completes):")
	for _, c := range commands() {
		name := "/" + c.name
		if c.args != "" {
			name += " " + c.args
		}
		fmt.Fprintf(&b, "\n  %-12s %s", name, c.help)
	}
	b.WriteString(`
Keys:
  Enter        send (while a turn runs, the prompt waits for it)
  Alt+Enter    a new line (also Shift+Enter where the terminal reports it, Ctrl+J, or \ before Enter)
  Up, Down     earlier prompts (kept across sessions); Ctrl+R searches them
  Tab          on an empty prompt: select a child in the panel, Enter opens its transcript, Esc returns
  Ctrl+O       unfold the tool results
  Esc          interrupt the running turn and every child's; the conversation goes on
  Ctrl+T       show or hide the model's thinking
  PgUp, PgDn   scroll the conversation
  Ctrl+C twice exit (also Ctrl+D on an empty prompt, /exit)`)
	m.log.add(entryNote, b.String())
	return nil
}

// complete completes the editor's slash command, or a task id after one
// that takes it: a single candidate is filled in, several are listed.
func (m *model) complete() {
	v := m.editor.Value()
	if !strings.HasPrefix(v, "/") || strings.Contains(v, "\n") {
		return
	}
	name, arg, hasArg := strings.Cut(v[1:], " ")
	var cands []string
	var prefix, typed string
	if !hasArg {
		prefix, typed = "/", name
		for _, c := range commands() {
			if strings.HasPrefix(c.name, name) {
				cands = append(cands, c.name)
			}
		}
	} else if name == "output" || name == "kill" {
		prefix, typed = "/"+name+" ", strings.TrimSpace(arg)
		for _, t := range m.ui.opts.Runtime.Tasks.List(m.agent) {
			if strings.HasPrefix(t.ID, typed) && (name == "output" || t.Status == task.Running) {
				cands = append(cands, t.ID)
			}
		}
		if name == "kill" {
			for _, r := range m.kids.rows {
				if r.child != "" && r.running() && strings.HasPrefix(r.child, typed) {
					cands = append(cands, r.child)
				}
			}
		}
	}
	switch len(cands) {
	case 0:
		m.hint = "no completion"
	case 1:
		m.editor.SetValue(prefix + cands[0] + " ")
		m.hint = ""
	default:
		m.editor.SetValue(prefix + commonPrefix(cands, typed))
		m.hint = strings.Join(cands, "  ")
	}
}

// commonPrefix is the longest prefix of every candidate (at least typed).
func commonPrefix(cands []string, typed string) string {
	p := cands[0]
	for _, c := range cands[1:] {
		for !strings.HasPrefix(c, p) {
			p = p[:len(p)-1]
		}
	}
	if len(p) < len(typed) {
		return typed
	}
	return p
}
