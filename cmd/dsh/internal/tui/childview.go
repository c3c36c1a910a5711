package tui

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/dsh-go/dsh/subagent"
)

// childView is a child's transcript, open in place of the conversation's:
// read from its session (live or stored) and reread while it grows.
type childView struct {
	id     string // the child's session id
	title  string
	seen   int // the events the transcript shows
	log    transcript
	err    string // why the session could not be read
	follow bool
}

// openChild shows the transcript of the child whose session is id.
func (m *model) openChild(id, title string) {
	m.view = &childView{id: id, title: title, seen: -1, follow: true}
	m.refreshView()
	m.follow = true
	m.hint = "Esc returns to the conversation · PgUp/PgDn scroll · ctrl+o unfolds tool results"
}

// closeChild returns to the conversation.
func (m *model) closeChild() {
	m.view, m.hint, m.follow = nil, "", true
	m.log.dirty = true
}

// refreshView rereads the open child's session when it has grown: its
// events are shown as the conversation's are, by a scratch model.
func (m *model) refreshView() {
	v := m.view
	if v == nil {
		return
	}
	h, events, err := m.ui.opts.Runtime.Sessions.Read(v.id)
	if err != nil {
		if v.err == "" {
			v.err = err.Error()
			v.log = transcript{}
			v.log.add(entryError, "✗ the child's session cannot be read: "+v.err)
		}
		return
	}
	if len(events) == v.seen {
		return
	}
	scratch := &model{ui: m.ui, agent: m.agent, st: m.st, tools: map[string]*entry{}, echoed: map[string]bool{},
		kids: newChildren(), now: m.now, inChild: true, cwd: h.Cwd}
	for _, e := range events {
		scratch.sessionEvent(e)
	}
	v.log, v.seen, v.err = scratch.log, len(events), ""
	v.log.dirty = true
}

// viewKey handles a key while a child's transcript is open.
func (m *model) viewKey(k tea.KeyMsg) tea.Cmd {
	switch k.String() {
	case "esc", "q":
		m.closeChild()
	case "pgup", "up":
		m.vp.HalfPageUp()
		m.follow = m.vp.AtBottom()
	case "pgdown", "down":
		m.vp.HalfPageDown()
		m.follow = m.vp.AtBottom()
	case "ctrl+o":
		m.expand = !m.expand
		m.view.log.dirty = true
	}
	return nil
}

// selectNext moves the panel's selection to the next child row (Tab on an
// empty editor); past the last one it clears.
func (m *model) selectNext() {
	rows, _ := m.kids.tree()
	if len(rows) == 0 {
		m.hint = "no children to open"
		return
	}
	i := 0
	for j, r := range rows {
		if r.info.RunID == m.selected {
			i = j + 1
		}
	}
	if i >= len(rows) {
		m.selected, m.hint = "", ""
		return
	}
	m.selected = rows[i].info.RunID
	m.hint = "Enter opens " + rows[i].info.Provider + " · " + label(rows[i].info) + "'s transcript · Tab the next child · any other key back to the editor"
}

// openSelected opens the selected row's transcript and reports whether
// one was selected.
func (m *model) openSelected() bool {
	if m.selected == "" {
		return false
	}
	r := m.kids.byRun[m.selected]
	m.selected = ""
	if r == nil {
		return false
	}
	m.openChild(r.info.ChildID, r.info.Provider+" · "+label(r.info))
	return true
}

// agents lists the children of this conversation (/agents), or opens the
// transcript of the one arg names: its number in the list, or its id or a
// prefix of it.
func (m *model) agents(arg string) tea.Cmd {
	subagents, id := m.ui.opts.Runtime.Subagents, m.agent.ID()
	m.ui.async(func() any {
		rows, err := subagents.ListDescendants(context.Background(), id)
		if err != nil {
			return noteMsg{text: "✗ /agents: " + err.Error(), err: true}
		}
		return agentsMsg{rows: rows, arg: arg}
	})
	return nil
}

// agentsMsg is the listing /agents asked for.
type agentsMsg struct {
	rows []subagent.ChildRow
	arg  string
}

// agentsListed shows or opens what /agents asked for.
func (m *model) agentsListed(a agentsMsg) {
	if len(a.rows) == 0 {
		m.log.add(entryNote, "No children in this conversation.")
		return
	}
	if a.arg == "" {
		var b strings.Builder
		b.WriteString("Children (/agents N opens one; Tab on an empty prompt selects one in the panel):")
		for i, r := range a.rows {
			fmt.Fprintf(&b, "\n%2d %s%s", i+1, strings.Repeat("  ", r.Depth-1), childRowLine(r))
		}
		m.log.add(entryNote, b.String())
		return
	}
	var match []subagent.ChildRow
	if n, err := strconv.Atoi(a.arg); err == nil && n >= 1 && n <= len(a.rows) {
		match = a.rows[n-1 : n]
	} else {
		for _, r := range a.rows {
			if strings.HasPrefix(r.ID, a.arg) {
				match = append(match, r)
			}
		}
	}
	switch len(match) {
	case 0:
		m.log.addf(entryError, "✗ /agents: no child %s (/agents lists them)", oneLine(a.arg, 40))
	case 1:
		m.openChild(match[0].ID, string(match[0].Mode)+" · "+oneLine(match[0].Label, 60))
	default:
		m.log.addf(entryError, "✗ /agents: %s names %d children: give more of the id", oneLine(a.arg, 40), len(match))
	}
}

// childRowLine is one stored child: its short id, mode, label and state.
func childRowLine(r subagent.ChildRow) string {
	state := "inactive"
	if r.Live {
		state = "live"
	}
	if r.Diagnostic != "" {
		state = r.Diagnostic
	}
	return fmt.Sprintf("%s · %s · %s · %s", shortID(r.ID), r.Mode, oneLine(r.Label, 60), state)
}
