package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/prompt/instructions"
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
		{"tasks", "", "list the background tasks of this conversation", (*model).tasks},
		{"output", "ID", "show a background task's output (reading it takes it off the panel)", (*model).output},
		{"kill", "ID", "stop a background task and its child, or a continuable child's turn, with everything it runs", (*model).kill},
		{"sessions", "", "list the stored sessions of this directory", (*model).sessions},
		{"resume", "ID", "continue a stored session here", (*model).resume},
		{"cost", "", "the tokens and cost of this conversation, children included", (*model).cost},
		{"compact", "[FOCUS]", "summarise the conversation so far to free the model's context (FOCUS: what to keep)", (*model).compact},
		{"model", "", "the model this conversation runs on", (*model).modelInfo},
		{"init", "", "write a first AGENTS.md here (never overwrites one)", func(m *model, _ string) tea.Cmd {
			m.log.add(entryNote, instructions.InitReport(m.agent.Cwd()))
			return nil
		}},
		{"help", "", "this list, and the keys", (*model).help},
		{"exit", "", "leave (the session is kept: dsh sessions show ID)", func(m *model, _ string) tea.Cmd { return m.quit() }},
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
	if len(list) == 0 {
		m.log.add(entryNote, "No background tasks.")
		return nil
	}
	var b strings.Builder
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
	out, snap, err := m.ui.opts.Runtime.Tasks.Read(id, m.agent)
	switch {
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

func (m *model) modelInfo(string) tea.Cmd {
	text := "Model: " + m.ui.opts.Model
	if len(m.ui.opts.Routes) > 0 {
		text += "\nConfigured routes: " + strings.Join(m.ui.opts.Routes, ", ") +
			"\nAnother one for a new conversation: dsh chat --provider ROUTE (or -m MODEL)"
	}
	m.log.add(entryNote, text)
	return nil
}

func (m *model) help(string) tea.Cmd {
	var b strings.Builder
	b.WriteString("Commands (Tab completes):")
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
  Up, Down     earlier prompts
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
