package tui

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
)

// The model's Markdown is drawn without its marks; a hostile nesting of
// thousands of quotes and lists is drawn as text past the bound (before
// the bound, the quotes alone took minutes: each level copied the text of
// the levels inside it).
func TestMarkdown(t *testing.T) {
	st := newStyles(os.Stdout, func(string) string { return "" })
	out := st.markdown("# Title\n\nSome **bold** and `code`, a [link](https://x.example).\n\n- one\n- two\n  1. nested\n\n> quoted\n\n```go\nfunc main() {}\n```\n", 60)
	for _, want := range []string{"Title", "bold", "code", "link", "(https://x.example)", "• one", "1. nested", "│ ", "func main() {}"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	for _, gone := range []string{"# Title", "**bold**", "```", "`code`"} {
		if strings.Contains(out, gone) {
			t.Errorf("%q is drawn as source:\n%s", gone, out)
		}
	}
	deep := st.markdown(strings.Repeat(">", 3000)+" deep\n\n"+strings.Repeat("- ", 2000)+"x\n", 80)
	if !strings.Contains(deep, "deep") {
		t.Fatalf("the deep document: %.200q", deep)
	}
}

// colourStyles are the styles of a 16-colour terminal with the given
// $COLORFGBG.
func colourStyles(colorfgbg string) *styles {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.ANSI)
	return stylesFor(r, func(k string) string {
		if k == "COLORFGBG" {
			return colorfgbg
		}
		return ""
	})
}

// A fenced block in a known language is drawn with its tokens coloured,
// and with the escapes taken out it is the source, line for line.
func TestMarkdownHighlightsCode(t *testing.T) {
	st := colourStyles("")
	src := "package main\n\nimport \"fmt\"\n\n// main says hi.\nfunc main() {\n    fmt.Println(\"hi\", 42, nil)\n}\n"
	out := st.markdown("Here:\n\n```go\n"+src+"```\n", 80)
	for _, want := range []string{
		"\x1b[35mpackage\x1b[0m",       // keyword
		"\x1b[32m\"fmt\"\x1b[0m",       // string
		"\x1b[3;90m// main says hi.",   // comment
		"\x1b[34mmain\x1b[0m",          // function
		"\x1b[33m42\x1b[0m",            // number
		"\x1b[35mnil\x1b[0m",           // constant
		"\x1b[34mPrintln\x1b[0m(\x1b[", // a call
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%q", want, out)
		}
	}
	code := strings.SplitN(ansi.Strip(out), "\n", 3)[2]
	if want := indentLines(strings.TrimSuffix(src, "\n"), "  ", "  "); code != want {
		t.Errorf("the code drawn is not the source:\n%q\nwant\n%q", code, want)
	}

	// On a light background, the colours that are faint on white change.
	light := colourStyles("0;15").markdown("```go\nvar n = 42\n```", 80)
	if !strings.Contains(light, "\x1b[31m42") || !strings.Contains(light, "\x1b[1;34mvar") {
		t.Errorf("light background: %q", light)
	}
}

// Every language the fences name gets its tokens coloured, and loses or
// adds no character.
func TestMarkdownHighlightLanguages(t *testing.T) {
	st := colourStyles("")
	for lang, src := range map[string]string{
		"go":         "func f() error { return nil } // done",
		"python":     "@cache\ndef f(x):\n    \"\"\"Doc\n    more.\"\"\"\n    return f'{x}' if x else None  # c",
		"py":         "import os",
		"js":         "const t = `a ${b({c: 1})} d`; // c",
		"typescript": "interface A { n: number }",
		"sh":         "for f in *; do echo \"$f ${HOME}\" 'lit'; done # c",
		"bash":       "X=1 make test",
		"json":       `{"a": [1, -2.5e3, true, null, "s\"q"]}`,
		"yaml":       "---\nname: dsh # c\nlist:\n  - run: go test\n    n: 3\n    q: \"a: b\"",
		"diff":       "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n same",
		"rust":       "#[derive(Debug)]\nfn f<'a>(s: &'a str) -> u8 { let r = r#\"x\"#; println!(\"{}\", 'c'); 1u8 }",
		"c":          "#include <stdio.h>\nint main(void) { /* c */ return printf(\"%d\\n\", 0x1f); }",
		"cpp":        "template <typename T> class A { std::string s = nullptr; };",
	} {
		out := st.markdown("```"+lang+"\n"+src+"\n```", 200)
		if !strings.Contains(out, "\x1b[") || strings.Contains(out, "\x1b[33m"+strings.SplitN(src, "\n", 2)[0]+"\x1b[0m") {
			t.Errorf("%s: not highlighted:\n%q", lang, out)
		}
		if got, want := ansi.Strip(out), indentLines(src, "  ", "  "); got != want {
			t.Errorf("%s: the code drawn is not the source:\n%q\nwant\n%q", lang, got, want)
		}
	}
}

// A block without a language, or with one dsh has no lexer for, is drawn
// as before: each line in the code colour.
func TestMarkdownPlainCode(t *testing.T) {
	st := colourStyles("")
	want := "  " + st.mdCode.Render("x := 1") + "\n  " + st.mdCode.Render("y") + "\n\n  " +
		st.mdCode.Render("fn x") + "\n\n  " + st.mdCode.Render("indented")
	if got := st.markdown("```\nx := 1\ny\n```\n\n```brainfuck\nfn x\n```\n\n    indented\n", 80); got != want {
		t.Errorf("plain blocks:\n%q\nwant\n%q", got, want)
	}
	// Without colour (NO_COLOR, not a terminal) nothing is highlighted.
	plain := newStyles(io.Discard, func(string) string { return "" })
	if got := plain.markdown("```go\nfunc main() {}\n```", 80); got != "  func main() {}" {
		t.Errorf("without colour: %q", got)
	}
}

// Past its bounds code is drawn plain: a block of more than
// maxHighlightBlock bytes or maxHighlightLines lines, and the blocks after
// maxHighlightDoc bytes of a document. Hostile code within the bounds
// (unclosed strings and comments, deep interpolations, long lines of words)
// is highlighted, character for character.
func TestMarkdownHighlightBounds(t *testing.T) {
	st := colourStyles("")
	h := st.code
	if h.highlight("go", "x := 1\n") == nil {
		t.Fatal("a small block is not highlighted")
	}
	for name, code := range map[string]string{
		"1 MB":        strings.Repeat("func f() {}\n", 1<<20/12),
		"100k lines":  strings.Repeat("\n", 100_000),
		"bytes":       strings.Repeat("x", maxHighlightBlock+1),
		"lines":       strings.Repeat("x\n", maxHighlightLines+1),
		"huge in doc": strings.Repeat("a := 1 // b\n", 5000),
	} {
		if name == "huge in doc" {
			out := st.markdown("```go\n"+code+"```", 80)
			if strings.Contains(out, "\x1b[35m") || !strings.Contains(out, st.mdCode.Render("a := 1 // b")) {
				t.Errorf("%s: a block past the bound is highlighted", name)
			}
			continue
		}
		if lines := h.highlight("go", code); lines != nil {
			t.Errorf("%s: highlighted (%d lines)", name, len(lines))
		}
	}
	// The document's budget: two blocks of 12 KiB fit, the third is plain.
	block := "```go\n" + strings.Repeat("var abcdefghijklmnopqrstuvwxyz = 1\n", 350) + "```\n\n"
	out := strings.Split(st.markdown(block+block+block, 80), "\n\n")
	if len(out) != 3 || !strings.Contains(out[1], "\x1b[35mvar") || strings.Contains(out[2], "\x1b[35mvar") {
		t.Errorf("the document's budget: %d blocks, highlighted %v %v %v", len(out),
			strings.Contains(out[0], "\x1b[35mvar"), strings.Contains(out[1], "\x1b[35mvar"), strings.Contains(out[2], "\x1b[35mvar"))
	}

	n := maxHighlightBlock/8 - 1
	for lang, code := range map[string]string{
		"go":     strings.Repeat("/* x ", n),
		"c":      strings.Repeat(`"\`, n) + "\n" + strings.Repeat("f (", n),
		"js":     strings.Repeat("`${", n),
		"sh":     strings.Repeat("${", n) + "\n" + strings.Repeat(`"$`, n),
		"json":   strings.Repeat(`"a" `, n) + "\n" + strings.Repeat(`"\`, n),
		"yaml":   strings.Repeat("word ", n) + "\n" + strings.Repeat("a:", n),
		"python": strings.Repeat(`"""'`, n),
		"rust":   strings.Repeat(`r#"'a`, n),
		"diff":   strings.Repeat("+", n),
	} {
		lines := h.highlight(lang, code)
		if lines == nil {
			t.Errorf("%s: hostile code within the bounds is not highlighted", lang)
			continue
		}
		if got := ansi.Strip(strings.Join(lines, "\n")); got != strings.TrimSuffix(code, "\n") {
			t.Errorf("%s: hostile code is not drawn as it is (%d bytes, want %d)", lang, len(got), len(code))
		}
	}
}

// BenchmarkHighlight is the time to highlight a block of Go: the first
// one of a screen also builds the lexer (compiles its rules).
func BenchmarkHighlight(b *testing.B) {
	src := strings.Repeat("// f returns n.\nfunc f(n int) (string, error) {\n\treturn fmt.Sprint(n, \"x\"), nil\n}\n", 10)
	b.Run("first block", func(b *testing.B) {
		for b.Loop() {
			if colourStyles("").code.highlight("go", src) == nil {
				b.Fatal("not highlighted")
			}
		}
	})
	for _, size := range []int{1 << 10, 16 << 10} {
		code := strings.Repeat(src, max(size/len(src), 1))
		h := colourStyles("").code
		b.Run(fmt.Sprintf("%d KiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(code)))
			for b.Loop() {
				if h.highlight("go", code) == nil {
					b.Fatal("not highlighted")
				}
			}
		})
	}
}
