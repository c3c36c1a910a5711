package tui

import (
	"os"
	"strings"
	"testing"
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
