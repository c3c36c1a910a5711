package tui

import (
	"strings"
	"sync"

	"github.com/alecthomas/chroma/v2"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// Fenced code is highlighted with chroma's core (its lexer engine and token
// types) and lexers written here (lexers.go). chroma's own lexers and styles
// packages build their registries in package init, 30–75 ms and 71,000
// allocations in every dsh process (BENCHMARKS §9.1); its core and its
// regular expressions cost ~0.1 ms and ~110 allocations. A lexer is built
// when the first block of its language is drawn, once per screen.

// Bounds on what is highlighted: a longer block, or the blocks past the
// document's budget, are drawn plain. Every lexer runs in time linear in
// its input (no rule scans ahead to a terminator), about 1 MB/s, so these
// bound the work: ~30 ms once an answer is in, at most.
const (
	maxHighlightBlock = 32 << 10 // bytes of one block
	maxHighlightLines = 1000     // lines of one block
	maxHighlightDoc   = 32 << 10 // bytes highlighted in one document
)

// tokenClass is what a token is drawn as.
type tokenClass int

const (
	plainToken tokenClass = iota // drawn as it is
	keywordToken
	typeToken
	funcToken
	stringToken
	numberToken
	commentToken
	metaToken // variables, keys, labels
	insertedToken
	deletedToken
	headingToken
	hunkToken
	tokenClasses
)

// classOf is the class of a token of type t.
func classOf(t chroma.TokenType) tokenClass {
	switch {
	case t == chroma.GenericInserted:
		return insertedToken
	case t == chroma.GenericDeleted:
		return deletedToken
	case t == chroma.GenericHeading:
		return headingToken
	case t == chroma.GenericSubheading:
		return hunkToken
	case t == chroma.KeywordType || t == chroma.NameBuiltin || t == chroma.NameClass:
		return typeToken
	case t == chroma.NameFunction || t == chroma.NameDecorator:
		return funcToken
	case t == chroma.NameVariable || t == chroma.NameTag || t == chroma.NameLabel:
		return metaToken
	case t.InCategory(chroma.Keyword):
		return keywordToken
	case t.InSubCategory(chroma.LiteralString):
		return stringToken
	case t.InSubCategory(chroma.LiteralNumber):
		return numberToken
	case t.InCategory(chroma.Comment):
		return commentToken
	}
	return plainToken
}

// codeStyles are the styles of the token classes.
type codeStyles [tokenClasses]lipgloss.Style

// newCodeStyles makes the token colours for a dark or light background, in
// the terminal's 16 colours so that its palette applies.
func newCodeStyles(r *lipgloss.Renderer, light bool) codeStyles {
	c := func(code string) lipgloss.Style { return r.NewStyle().Foreground(lipgloss.Color(code)) }
	var s codeStyles
	s[keywordToken] = c("5")
	s[typeToken] = c("6")
	s[funcToken] = c("4")
	s[stringToken] = c("2")
	s[numberToken] = c("3")
	s[commentToken] = c("8").Italic(true)
	s[metaToken] = c("6")
	s[insertedToken] = c("2")
	s[deletedToken] = c("1")
	s[headingToken] = r.NewStyle().Bold(true)
	s[hunkToken] = c("6")
	if light { // yellow and cyan are faint on white
		s[keywordToken] = c("4").Bold(true)
		s[typeToken], s[metaToken], s[hunkToken] = c("4"), c("4"), c("4")
		s[funcToken] = c("5")
		s[numberToken] = c("1")
	}
	return s
}

// highlighter draws code blocks in colour. Its lexers are built on first
// use; it is safe for concurrent use.
type highlighter struct {
	color bool // the terminal shows colour: without it, nothing is highlighted
	// The escapes that open and close each class's style, taken from
	// lipgloss once: rendering each run through it was a fifth of the time.
	open, close [tokenClasses]string

	mu     sync.Mutex
	lexers map[string]chroma.Lexer // by language name, built when first asked for
}

// newHighlighter makes the highlighter of r's terminal.
func newHighlighter(r *lipgloss.Renderer, light bool) *highlighter {
	h := &highlighter{color: r.ColorProfile() != termenv.Ascii}
	for c, st := range newCodeStyles(r, light) {
		drawn := st.Render("x")
		i := strings.IndexByte(drawn, 'x')
		h.open[c], h.close[c] = drawn[:i], drawn[i+1:]
	}
	return h
}

// lexer returns the lexer for a fence's language, or nil.
func (h *highlighter) lexer(lang string) chroma.Lexer {
	name := lexerName(lang)
	if name == "" {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if l, ok := h.lexers[name]; ok {
		return l
	}
	if h.lexers == nil {
		h.lexers = map[string]chroma.Lexer{}
	}
	l := newLexer(name)
	h.lexers[name] = l
	return l
}

// highlight returns code's lines with their tokens styled, or nil when the
// language is not known, colour is off or the code is past the bounds
// (the caller then draws it plain). code is sanitized text.
func (h *highlighter) highlight(lang, code string) (lines []string) {
	if !h.color || len(code) > maxHighlightBlock || strings.Count(code, "\n") > maxHighlightLines {
		return nil
	}
	l := h.lexer(lang)
	if l == nil {
		return nil
	}
	defer func() {
		// A lexer that fails on some input must not take the screen
		// down: the block is drawn plain.
		if r := recover(); r != nil {
			lines = nil
		}
	}()
	it, err := l.Tokenise(nil, code)
	if err != nil {
		return nil
	}
	// Tokens of one class in a row are drawn as one run.
	var line, run strings.Builder
	class := plainToken
	flush := func() {
		if run.Len() == 0 {
			return
		}
		line.WriteString(h.open[class])
		line.WriteString(run.String())
		line.WriteString(h.close[class])
		run.Reset()
	}
	for tok := it(); tok != chroma.EOF; tok = it() {
		if c := classOf(tok.Type); c != class {
			flush()
			class = c
		}
		for i, part := range strings.Split(tok.Value, "\n") {
			if i > 0 {
				flush()
				lines = append(lines, line.String())
				line.Reset()
			}
			run.WriteString(part)
		}
	}
	flush()
	if line.Len() > 0 {
		lines = append(lines, line.String())
	}
	return lines
}
