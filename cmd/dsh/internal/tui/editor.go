package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/textarea"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// editorStyles are the editor's styles in fixed colours: the library's
// defaults are adaptive, and drawing one asks the terminal for its
// background colour, which a terminal that does not answer makes the
// program wait for while it swallows what is typed.
func editorStyles(st *styles) textarea.Style {
	plain := lipgloss.NewStyle()
	return textarea.Style{
		Base:             plain,
		CursorLine:       plain,
		CursorLineNumber: st.dim,
		EndOfBuffer:      st.dim,
		LineNumber:       st.dim,
		Placeholder:      st.dim,
		Prompt:           plain,
		Text:             plain,
	}
}

// growEditor makes room in the editor for extra more lines before they
// are inserted, so that it does not scroll its first lines out of view
// while it still has room to show them all.
func (m *model) growEditor(extra int) {
	m.editor.SetHeight(min(max(m.editor.LineCount()+extra, 1), maxEditorLines))
}

// setEditor replaces the editor's text, showing every line it can.
func (m *model) setEditor(v string) {
	m.editor.Reset()
	m.growEditor(strings.Count(v, "\n"))
	m.editor.SetValue(v)
}

// menuLimit bounds the slash menu's rows.
const menuLimit = 8

// menuView is the slash menu: while the editor holds a slash command's
// name being typed, the commands it may be, with what they do.
func (m *model) menuView() string {
	v := m.editor.Value()
	if !strings.HasPrefix(v, "/") || strings.ContainsAny(v, " \n") || strings.HasPrefix(v, "//") || m.view != nil {
		return ""
	}
	var lines []string
	n := 0
	for _, c := range commands() {
		if !strings.HasPrefix(c.name, v[1:]) {
			continue
		}
		n++
		if len(lines) < menuLimit {
			name := "/" + c.name
			if c.args != "" {
				name += " " + c.args
			}
			lines = append(lines, m.st.note.Render(fmt.Sprintf("  %-16s", name))+m.st.dim.Render(oneLine(c.help, m.width-20)))
		}
	}
	if n > menuLimit {
		lines = append(lines, m.st.dim.Render(fmt.Sprintf("  … %d more (type to narrow, Tab completes)", n-menuLimit)))
	}
	if n == 0 {
		return m.st.dim.Render("  no such command: /help lists them (// sends a slash)")
	}
	return strings.Join(lines, "\n")
}

// search is a reverse search of the history (Ctrl+R).
type search struct {
	query string
	at    int    // the index of the match shown; len(items) before the first
	match string // "" when nothing matches
}

// startSearch begins a reverse search of the history.
func (m *model) startSearch() {
	m.search = &search{at: len(m.history.items)}
	m.hint = "(reverse search) type to search · ctrl+r older · enter takes it · esc cancels"
}

// searchKey handles a key during a reverse search.
func (m *model) searchKey(k tea.KeyMsg) tea.Cmd {
	s := m.search
	find := func(before int) {
		if match, at := m.history.search(s.query, before); at >= 0 {
			s.match, s.at = match, at
		} else if before == len(m.history.items) {
			s.match = ""
		}
	}
	switch k.Type {
	case tea.KeyCtrlR:
		if s.query != "" {
			find(s.at)
		}
	case tea.KeyEsc, tea.KeyCtrlG:
		m.search, m.hint = nil, ""
		return nil
	case tea.KeyEnter, tea.KeyTab, tea.KeyRight, tea.KeyLeft:
		m.search, m.hint = nil, ""
		if s.match != "" {
			m.setEditor(s.match)
		}
		return nil
	case tea.KeyBackspace:
		if r := []rune(s.query); len(r) > 0 {
			s.query = string(r[:len(r)-1])
			find(len(m.history.items))
		}
	case tea.KeyRunes, tea.KeySpace:
		s.query += string(k.Runes)
		if k.Type == tea.KeySpace {
			s.query += " "
		}
		find(len(m.history.items))
	}
	shown := s.match
	if s.query != "" && shown == "" {
		shown = "(no match)"
	}
	m.hint = fmt.Sprintf("(reverse search) %q: %s", s.query, strings.ReplaceAll(shown, "\n", " ⏎ "))
	return nil
}
