package tui

import (
	"fmt"
	"strings"
)

// entryKind says what a transcript entry shows.
type entryKind int

const (
	entryPrompt   entryKind = iota // what the person sent
	entryAnswer                    // the model's text
	entryThinking                  // the model's reasoning
	entryTool                      // a tool call and, once back, its result
	entryChild                     // a child run starting or ending
	entryNote                      // what dsh says: command output, notices
	entryError                     // what went wrong: a failed turn, a refused command
)

// entry is one block of the transcript. Its text is sanitized: add does it,
// and whoever appends to it does too.
type entry struct {
	kind   entryKind
	text   string
	status string // entryTool: "" while it runs, then "ok" or the error code
	open   bool   // entryThinking: still streaming
	done   bool   // entryAnswer: the whole message is in, so it renders as Markdown

	tool   string // entryTool: the tool's name
	diff   string // entryTool: the change an edit_file or write_file call makes (sanitized)
	output string // entryTool: the result's text, bounded (sanitized)

	cache      string // the rendering at cacheWidth, valid until the entry changes
	cacheWidth int
	cacheFold  bool
	cacheOpen  bool // the tool results were expanded

	// An answer streams at its end: the wrapping of its text up to its
	// last newline is kept, so that a delta rewraps only the last line.
	stable      string
	stableLen   int // the length of the text stable wraps; -1: none
	stableWidth int
}

// maxEntries bounds the transcript the screen keeps; the session log keeps
// everything.
const maxEntries = 2000

// transcript is the conversation as the screen shows it.
type transcript struct {
	entries []*entry
	trimmed int  // entries dropped from the top
	dirty   bool // changed since it was last rendered
	width   int  // the view's width and height when it was last rendered
	height  int
}

func (t *transcript) add(kind entryKind, text string) *entry {
	e := &entry{kind: kind, text: sanitize(text), stableLen: -1}
	t.entries = append(t.entries, e)
	if over := len(t.entries) - maxEntries; over > 0 {
		t.trimmed += over
		t.entries = append(t.entries[:0:0], t.entries[over:]...)
	}
	t.dirty = true
	return e
}

// addf adds an entry of formatted text.
func (t *transcript) addf(kind entryKind, format string, args ...any) *entry {
	return t.add(kind, fmt.Sprintf(format, args...))
}

// update marks e changed.
func (t *transcript) update(e *entry) {
	e.cache = ""
	t.dirty = true
}

// replace sets e's whole text.
func (t *transcript) replace(e *entry, text string) {
	e.text, e.stableLen = text, -1
	t.update(e)
}

// render draws the transcript at width; fold collapses thinking blocks,
// expand unfolds tool results.
func (t *transcript) render(st *styles, width int, fold, expand bool) string {
	var b strings.Builder
	if t.trimmed > 0 {
		b.WriteString(st.dim.Render(fmt.Sprintf("(%d earlier entries are in the session log)", t.trimmed)))
		b.WriteString("\n")
	}
	for i, e := range t.entries {
		if e.cache == "" || e.cacheWidth != width || (e.kind == entryThinking && e.cacheFold != fold) ||
			(e.kind == entryTool && e.cacheOpen != expand) {
			e.cache, e.cacheWidth, e.cacheFold, e.cacheOpen = e.render(st, width, fold, expand), width, fold, expand
		}
		if i > 0 && e.kind == entryPrompt {
			b.WriteString("\n") // a blank line before each exchange
		}
		b.WriteString(e.cache)
		b.WriteString("\n")
	}
	t.dirty = false
	return strings.TrimSuffix(b.String(), "\n")
}

// render draws one entry at width.
func (e *entry) render(st *styles, width int, fold, expand bool) string {
	switch e.kind {
	case entryPrompt:
		return st.prompt.Render(indentLines(wrap(e.text, width-2), "› ", "  "))
	case entryAnswer:
		if e.done {
			return st.markdown(e.text, width)
		}
		text := strings.TrimRight(e.text, "\n")
		cut := strings.LastIndexByte(text, '\n')
		if cut < 0 {
			return wrap(text, width)
		}
		if e.stableLen != cut || e.stableWidth != width {
			e.stable, e.stableLen, e.stableWidth = wrap(text[:cut], width), cut, width
		}
		return e.stable + "\n" + wrap(text[cut+1:], width)
	case entryThinking:
		words := len(strings.Fields(e.text))
		if fold {
			head := fmt.Sprintf("▸ thinking · %d words (ctrl+t shows)", words)
			if e.open {
				lines := strings.Split(strings.TrimRight(e.text, "\n"), "\n")
				head = "▸ thinking… " + lines[len(lines)-1]
			}
			return st.dim.Render(oneLine(head, width))
		}
		body := indentLines(wrap(strings.TrimRight(e.text, "\n"), width-2), "│ ", "│ ")
		return st.dim.Render("▾ thinking (ctrl+t hides)\n" + body)
	case entryTool:
		return e.renderTool(st, width, expand)
	case entryChild:
		return st.child.Render(indentLines(wrap(e.text, width-2), "", "  "))
	case entryError:
		return st.err.Render(wrap(e.text, width))
	}
	return st.note.Render(wrap(e.text, width))
}
