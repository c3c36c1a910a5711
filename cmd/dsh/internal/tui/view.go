package tui

import (
	"fmt"
	"io"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
)

// styles are the screen's styles, made for its terminal.
type styles struct {
	dim, note, err, ok, prompt, child, status, hint, box, askBox lipgloss.Style

	// The Markdown styles (see markdown.go).
	mdHeading, mdBold, mdItalic, mdCode, mdLink lipgloss.Style

	code *highlighter // fenced code's colours

	profile termenv.Profile
	light   bool // the terminal's background is light, as $COLORFGBG says
}

func newStyles(out io.Writer, getenv func(string) string) *styles {
	return stylesFor(lipgloss.NewRenderer(out), getenv)
}

// stylesFor makes the styles of r's terminal.
func stylesFor(r *lipgloss.Renderer, getenv func(string) string) *styles {
	c := func(code string) lipgloss.Style { return r.NewStyle().Foreground(lipgloss.Color(code)) }
	light := lightBackground(getenv("COLORFGBG"))
	return &styles{
		code:    newHighlighter(r, light),
		profile: r.ColorProfile(),
		light:   light,
		dim:     c("8"),
		note:    c("6"),
		err:     c("1"),
		ok:      c("2"),
		prompt:  c("4").Bold(true),
		child:   c("5"),
		status:  r.NewStyle().Reverse(true),
		hint:    c("3"),
		box:     r.NewStyle().Border(lipgloss.RoundedBorder()).BorderForeground(lipgloss.Color("8")),
		askBox:  r.NewStyle().Border(lipgloss.RoundedBorder()).BorderForeground(lipgloss.Color("3")),

		mdHeading: c("4").Bold(true),
		mdBold:    r.NewStyle().Bold(true),
		mdItalic:  r.NewStyle().Italic(true),
		mdCode:    c("3"),
		mdLink:    c("6").Underline(true),
	}
}

// lightBackground reads $COLORFGBG ("fg;bg"), which terminals that set it
// use to tell their colours without a query: background 7 or 15 is light.
// The terminal is never asked (a terminal that does not answer would eat
// the first keys typed).
func lightBackground(colorfgbg string) bool {
	i := strings.LastIndexByte(colorfgbg, ';')
	bg := colorfgbg[i+1:]
	return bg == "7" || bg == "15"
}

// maxEditorLines bounds the editor's height; a longer prompt scrolls in it.
const maxEditorLines = 8

// layout fits the parts to the window and refreshes the transcript view.
// Every part is drawn at most the window's width, so that a resize never
// leaves a wrapped line behind.
func (m *model) layout() {
	w := max(m.width, 10)
	m.editor.SetWidth(w - 2)
	m.editor.SetHeight(min(max(m.editor.LineCount(), 1), maxEditorLines))
	rest := m.height - lipgloss.Height(m.editorView()) - lipgloss.Height(m.statusView())
	if v := m.panelView(); v != "" {
		rest -= lipgloss.Height(v)
	}
	if v := m.askView(); v != "" {
		rest -= lipgloss.Height(v)
	}
	if v := m.menuView(); v != "" {
		rest -= lipgloss.Height(v)
	}
	if m.hint != "" {
		rest--
	}
	m.vp.Width, m.vp.Height = w, max(rest, 1)
	log := &m.log
	if m.view != nil {
		log = &m.view.log
	}
	if log.dirty || m.vp.Width != log.width || m.vp.Height != log.height {
		log.width, log.height = m.vp.Width, m.vp.Height
		text := log.render(m.st, w, !m.showThink, m.expand)
		if m.view != nil {
			head := m.st.status.Render(ansiTruncate(" "+oneLine(m.view.title, w)+" · a child's transcript · esc returns ", w))
			text = head + "\n" + text
		}
		if n := strings.Count(text, "\n") + 1; n < m.vp.Height {
			text = strings.Repeat("\n", m.vp.Height-n) + text // the conversation sits on the editor
		}
		m.vp.SetContent(text)
	}
	if m.follow {
		m.vp.GotoBottom()
	}
}

// View implements tea.Model.
func (m *model) View() string {
	if m.quitting {
		return ""
	}
	parts := []string{m.vp.View()}
	for _, v := range []string{m.panelView(), m.askView(), m.menuView(), m.editorView()} {
		if v != "" {
			parts = append(parts, v)
		}
	}
	if m.hint != "" {
		parts = append(parts, m.st.hint.Render(oneLine(m.hint, m.width)))
	}
	parts = append(parts, m.statusView())
	return strings.Join(parts, "\n")
}

// panelView is the live tree of this conversation's children, at most a
// third of the window.
func (m *model) panelView() string {
	rows, depths := m.kids.tree()
	if len(rows) == 0 {
		return ""
	}
	limit := max(m.height/3, 2)
	var lines []string
	for i, r := range rows {
		if len(lines) == limit-1 && len(rows) > limit {
			lines = append(lines, m.st.dim.Render(fmt.Sprintf("  … %d more (/tasks lists the background ones)", len(rows)-i)))
			break
		}
		style := m.st.child
		switch {
		case r.running():
		case r.status == "completed":
			style = m.st.dim
		default:
			style = m.st.err
		}
		line := r.line(m.now, depths[i], m.width)
		if r.info.RunID == m.selected {
			style = style.Reverse(true)
		}
		lines = append(lines, style.Render(line))
	}
	return strings.Join(lines, "\n")
}

// askView is the oldest permission ask, with its choices.
func (m *model) askView() string {
	if len(m.asks) == 0 {
		return ""
	}
	a := m.asks[0]
	inner := max(m.width-4, 6)
	lines := []string{
		oneLine(fmt.Sprintf("%s wants to run %s", a.req.Who(), a.req.Tool), inner),
		m.st.dim.Render(oneLine(toolSummary(a.req.Tool, string(a.req.Arguments)), inner)),
	}
	if a.diff != "" {
		diff := strings.Split(a.diff, "\n")
		limit := max(m.height/3, 4)
		if len(diff) > limit {
			diff = append(diff[:limit-1:limit-1], fmt.Sprintf("… %d more lines", len(diff)-limit+1))
		}
		for _, l := range diff {
			l = ansiTruncate(l, inner)
			switch {
			case strings.HasPrefix(l, "@@"), strings.HasPrefix(l, "…"):
				l = m.st.note.Render(l)
			case strings.HasPrefix(l, "+"):
				l = m.st.ok.Render(l)
			case strings.HasPrefix(l, "-"):
				l = m.st.err.Render(l)
			}
			lines = append(lines, l)
		}
	}
	lines = append(lines, oneLine("y allow once · a allow "+a.req.Tool+": this tool, this tree, this session · n deny", inner))
	if n := len(m.asks) - 1; n > 0 {
		lines = append(lines, m.st.dim.Render(fmt.Sprintf("(%d more waiting)", n)))
	}
	return m.st.askBox.Width(max(m.width-2, 8)).Render(strings.Join(lines, "\n"))
}

// editorView is the editor in its box.
func (m *model) editorView() string {
	k := editorKey{text: m.editor.Value(), width: m.width, height: m.editor.Height(),
		line: m.editor.Line(), col: m.editor.LineInfo().ColumnOffset, focused: m.editor.Focused()}
	if m.edView == "" || k != m.edKey {
		m.edKey, m.edView = k, m.st.box.Width(max(m.width-2, 8)).Render(m.editor.View())
	}
	return m.edView
}

// editorKey is what the editor's drawing depends on. While a model
// streams, the editor is the same at every frame: drawing it anew each
// time was a third of the screen's work.
type editorKey struct {
	text                     string
	width, height, line, col int
	focused                  bool
}

// statusView is the last line: the model, the session, what runs, the
// context and what it spent, and the keys that matter now. On a narrow
// terminal the model's name and the keys give way first.
func (m *model) statusView() string {
	state := "ready"
	if m.busy {
		state = "working " + elapsed(m.now.Sub(m.turnStart)) + " · esc interrupts"
	}
	if n := m.kids.live(); n > 0 {
		state += fmt.Sprintf(" · %d running", n)
	}
	spent := tokens(m.spent.Input+m.spent.CacheRead+m.spent.Output) + " tokens"
	if m.dropped > 0 {
		spent = fmt.Sprintf("%d updates skipped · ", m.dropped) + spent
	}
	withCtx := spent
	if m.ctxTokens > 0 {
		ctx := "context " + tokens(m.ctxTokens)
		if w := m.window(); w > 0 {
			ctx = fmt.Sprintf("context %s/%s (%d%%)", tokens(m.ctxTokens), tokens(w), m.ctxTokens*100/w)
		}
		withCtx = ctx + " · " + spent
	}
	head := fmt.Sprintf(" %s · %s · %s", m.modelName, shortID(m.agent.ID()), state)
	var line string
	for _, parts := range [][2]string{
		{head, withCtx + " · ctrl+c twice exits "},
		{head, withCtx + " "},
		{fmt.Sprintf(" %s · %s", m.modelName, state), spent + " "},
	} {
		left, right := parts[0], parts[1]
		gap := m.width - ansi.StringWidth(left) - ansi.StringWidth(right)
		line = left + strings.Repeat(" ", max(gap, 1)) + right
		if gap >= 1 {
			break
		}
	}
	return m.st.status.Render(ansi.Truncate(line, max(m.width, 1), "…"))
}

// window is the context window of the model the next turn runs on; 0 when
// unknown.
func (m *model) window() int64 {
	if m.ui.opts.Window == nil {
		return 0
	}
	return m.ui.opts.Window(m.modelName)
}

// shortID is the first 8 characters of an id, enough to name it.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
