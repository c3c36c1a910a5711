package tui

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	gtext "github.com/yuin/goldmark/text"
)

// The model's Markdown is parsed with goldmark and drawn with the screen's
// styles: headings bold without their #, emphasis, inline code in a colour
// of its own, fenced code highlighted when its language is known
// (highlight.go), lists, quotes, links with their target. glamour was not
// used: the highlighter it brings builds its tables when a program starts,
// about 17 ms that every dsh process paid, `dsh acp`'s readiness for each
// `command: self` child included.

// maxMarkdown bounds the answer rendered as Markdown; a longer one shows as
// text.
const maxMarkdown = 128 << 10

// markdown renders the model's Markdown at width.
func (st *styles) markdown(text string, width int) string {
	if len(text) > maxMarkdown {
		return wrap(text, width)
	}
	src := []byte(text)
	w := mdWriter{st: st, src: src, highlighted: new(int)}
	w.blocks(goldmark.DefaultParser().Parse(gtext.NewReader(src)), max(width, 10), "")
	return strings.Trim(w.out.String(), "\n")
}

// mdWriter draws one document.
type mdWriter struct {
	st    *styles
	src   []byte
	out   strings.Builder
	depth int // lists and quotes this writer is inside

	highlighted *int // bytes of code highlighted in the document, against maxHighlightDoc
}

// maxMarkdownDepth bounds nested lists and quotes drawn as such: a model's
// ">>>>…" of thousands of levels would otherwise copy each level's text
// once per level. Deeper ones show as their text.
const maxMarkdownDepth = 16

// sub returns a writer for a list item's or a quote's blocks.
func (w *mdWriter) sub() *mdWriter {
	return &mdWriter{st: w.st, src: w.src, depth: w.depth + 1, highlighted: w.highlighted}
}

// blocks draws n's block children, a blank line apart, each line after
// the first of a block prefixed by indent.
func (w *mdWriter) blocks(n ast.Node, width int, indent string) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if c != n.FirstChild() {
			w.out.WriteString("\n")
		}
		w.block(c, width, indent)
	}
}

func (w *mdWriter) block(n ast.Node, width int, indent string) {
	if w.depth > maxMarkdownDepth {
		w.para(w.plain(n), width, indent)
		return
	}
	switch n := n.(type) {
	case *ast.Heading:
		w.para(w.st.mdHeading.Render(w.inline(n)), width, indent)
	case *ast.Paragraph, *ast.TextBlock:
		w.para(w.inline(n), width, indent)
	case *ast.FencedCodeBlock:
		w.code(n.Lines(), string(n.Language(w.src)), indent)
	case *ast.CodeBlock:
		w.code(n.Lines(), "", indent)
	case *ast.List:
		num := n.Start
		for item := n.FirstChild(); item != nil; item = item.NextSibling() {
			mark := "• "
			if n.IsOrdered() {
				mark = strconv.Itoa(num) + ". "
				num++
			}
			w.out.WriteString(indent + mark)
			sub := w.sub()
			sub.blocks(item, width-len(mark), "")
			body := strings.TrimRight(sub.out.String(), "\n")
			w.out.WriteString(strings.ReplaceAll(body, "\n", "\n"+indent+strings.Repeat(" ", len(mark))) + "\n")
		}
	case *ast.Blockquote:
		sub := w.sub()
		sub.blocks(n, width-2, "")
		for _, line := range strings.Split(strings.TrimRight(sub.out.String(), "\n"), "\n") {
			w.out.WriteString(indent + w.st.dim.Render("│ ") + line + "\n")
		}
	case *ast.ThematicBreak:
		w.out.WriteString(indent + w.st.dim.Render(strings.Repeat("─", min(width, 40))) + "\n")
	case *ast.HTMLBlock:
		lines := n.Lines()
		for i := range lines.Len() {
			seg := lines.At(i)
			w.out.WriteString(indent + strings.TrimRight(string(seg.Value(w.src)), "\n") + "\n")
		}
	default:
		w.blocks(n, width, indent)
	}
}

// code writes a code block's lines, highlighted when lang is known and the
// document's budget allows, else in the code colour.
func (w *mdWriter) code(segs *gtext.Segments, lang, indent string) {
	var b strings.Builder
	for i := range segs.Len() {
		seg := segs.At(i)
		b.Write(seg.Value(w.src))
	}
	src := b.String()
	if src == "" {
		return
	}
	var lines []string
	if lang != "" && *w.highlighted+len(src) <= maxHighlightDoc {
		if lines = w.st.code.highlight(lang, src); lines != nil {
			*w.highlighted += len(src)
		}
	}
	if lines == nil {
		for _, line := range strings.Split(strings.TrimSuffix(src, "\n"), "\n") {
			lines = append(lines, w.st.mdCode.Render(line))
		}
	}
	for _, line := range lines {
		w.out.WriteString(indent + "  " + line + "\n")
	}
}

// para writes styled text wrapped at width, each line after indent.
func (w *mdWriter) para(text string, width int, indent string) {
	wrapped := lipgloss.NewStyle().Width(max(width-len(indent), 10)).Render(text)
	for _, line := range strings.Split(wrapped, "\n") {
		w.out.WriteString(indent + strings.TrimRight(line, " ") + "\n")
	}
}

// inline draws n's inline children as styled text.
func (w *mdWriter) inline(n ast.Node) string {
	var b bytes.Buffer
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Segment.Value(w.src))
			switch {
			case c.HardLineBreak():
				b.WriteByte('\n')
			case c.SoftLineBreak():
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(c.Value)
		case *ast.CodeSpan:
			b.WriteString(w.st.mdCode.Render(w.plain(c)))
		case *ast.Emphasis:
			s := w.st.mdItalic
			if c.Level >= 2 {
				s = w.st.mdBold
			}
			b.WriteString(s.Render(w.inline(c)))
		case *ast.Link:
			b.WriteString(w.st.mdLink.Render(w.inline(c)))
			if dest := string(c.Destination); dest != "" && dest != w.plain(c) {
				b.WriteString(w.st.dim.Render(" (" + dest + ")"))
			}
		case *ast.AutoLink:
			b.WriteString(w.st.mdLink.Render(string(c.URL(w.src))))
		case *ast.Image:
			b.WriteString(w.st.dim.Render("[image: " + w.plain(c) + "]"))
		case *ast.RawHTML:
			segs := c.Segments
			for i := range segs.Len() {
				seg := segs.At(i)
				b.Write(seg.Value(w.src))
			}
		default:
			b.WriteString(w.inline(c))
		}
	}
	return b.String()
}

// plain is n's text without styles.
func (w *mdWriter) plain(n ast.Node) string {
	var b bytes.Buffer
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if t, ok := c.(*ast.Text); ok {
			b.Write(t.Segment.Value(w.src))
		} else {
			b.WriteString(w.plain(c))
		}
	}
	return b.String()
}
