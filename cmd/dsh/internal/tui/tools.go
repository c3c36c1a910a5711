package tui

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-go/dsh/content"
)

// toolArgs are the arguments of the built-in tools the transcript knows
// how to summarize; a tool's other arguments are ignored.
type toolArgs struct {
	Command    string `json:"command"`
	Path       string `json:"path"`
	Pattern    string `json:"pattern"`
	Content    string `json:"content"`
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all"`
	Task       string `json:"task"`
	Prompt     string `json:"prompt"`
}

// toolSummary is one line saying what a call does: the command of bash,
// the file of the file tools, the pattern of the searches; the raw
// arguments of any other tool.
func toolSummary(name, args string) string {
	var a toolArgs
	if json.Unmarshal([]byte(args), &a) != nil {
		return name + " " + args
	}
	switch name {
	case "bash":
		if a.Command != "" {
			return "$ " + a.Command
		}
	case "read_file", "edit_file":
		if a.Path != "" {
			return name + " " + a.Path
		}
	case "write_file":
		if a.Path != "" {
			return fmt.Sprintf("write_file %s (%d lines)", a.Path, lineCount(a.Content))
		}
	case "glob", "grep":
		if a.Pattern != "" {
			s := name + " " + a.Pattern
			if a.Path != "" {
				s += " in " + a.Path
			}
			return s
		}
	}
	if t := a.Task + a.Prompt; t != "" {
		return name + " · " + t
	}
	return name + " " + args
}

func lineCount(s string) int {
	if s == "" {
		return 0
	}
	return strings.Count(strings.TrimSuffix(s, "\n"), "\n") + 1
}

// maxDiffFile bounds the file a diff reads from disk.
const maxDiffFile = 256 << 10

// toolDiff is the unified diff a call of edit_file or write_file makes, as
// far as its arguments and the file on disk (a regular file of at most
// maxDiffFile bytes, relative to cwd) tell: the file before and after the
// call; for an edit whose old text the file does not hold (any more), the
// old text against the new. It is "" for other tools and for bad
// arguments.
func toolDiff(name, args, cwd string) string {
	var a toolArgs
	if (name != "edit_file" && name != "write_file") || json.Unmarshal([]byte(args), &a) != nil || a.Path == "" {
		return ""
	}
	p := a.Path
	if !filepath.IsAbs(p) {
		p = filepath.Join(cwd, p)
	}
	old, ok := readSmall(p)
	if name == "write_file" {
		if !ok {
			return "" // a file that cannot be compared: the summary says enough
		}
		return unifiedDiff(a.Path, old, a.Content)
	}
	if a.OldString == "" || !strings.Contains(old, a.OldString) {
		return unifiedDiff(a.Path, a.OldString, a.NewString)
	}
	n := 1
	if a.ReplaceAll {
		n = -1
	}
	return unifiedDiff(a.Path, old, strings.Replace(old, a.OldString, a.NewString, n))
}

// readSmall returns the text of the file at p: "" and true when there is
// none; false when it is not a regular file, is larger than maxDiffFile, or
// does not read. A FIFO or a device the model names is never opened, nor a
// file that says it is empty (the files of /proc and /sys, which may
// block): they must not block or flood the screen.
func readSmall(p string) (string, bool) {
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", true
	case err != nil || !fi.Mode().IsRegular() || fi.Size() > maxDiffFile:
		return "", false
	case fi.Size() == 0:
		return "", true
	}
	f, err := os.Open(p)
	if err != nil {
		return "", false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDiffFile))
	return string(b), err == nil
}

// maxDiffLines bounds the lines of each side a diff reads.
const maxDiffLines = 20000

// maxDiffWork bounds the product of the changed region's lengths, which
// the comparison's time and memory grow with.
const maxDiffWork = 1 << 20

// diffContext is how many unchanged lines surround a change.
const diffContext = 3

// unifiedDiff renders the change from old to new as a unified diff of
// name, without the file headers; "" when nothing changes.
func unifiedDiff(name, old, new string) string {
	if old == new {
		return ""
	}
	a, b := splitLines(old), splitLines(new)
	if len(a) > maxDiffLines || len(b) > maxDiffLines {
		return fmt.Sprintf("@@ %s: %d lines → %d lines (too large to compare) @@", name, len(a), len(b))
	}
	// The lines both sides start and end with are kept out of the
	// comparison: an edit changes a small region of a large file.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	if (len(a)-pre-suf)*(len(b)-pre-suf) > maxDiffWork {
		return fmt.Sprintf("@@ %s: %d lines → %d lines (too large to compare) @@", name, len(a), len(b))
	}
	ops := append(append([]byte(strings.Repeat("=", pre)), diffOps(a[pre:len(a)-suf], b[pre:len(b)-suf])...),
		strings.Repeat("=", suf)...)
	// Hunks: runs of changes with their context, merged when close.
	type line struct {
		op   byte
		text string
		ai   int // 1-based line numbers where the line sits
		bi   int
	}
	var all []line
	ai, bi := 1, 1
	for _, op := range ops {
		switch op {
		case '=':
			all = append(all, line{'=', a[ai-1], ai, bi})
			ai++
			bi++
		case '-':
			all = append(all, line{'-', a[ai-1], ai, bi})
			ai++
		case '+':
			all = append(all, line{'+', b[bi-1], ai, bi})
			bi++
		}
	}
	var out strings.Builder
	for i := 0; i < len(all); {
		if all[i].op == '=' {
			i++
			continue
		}
		start := max(i-diffContext, 0)
		end := i
		for j := i; j < len(all); j++ {
			if all[j].op != '=' {
				end = j
			} else if j-end > 2*diffContext {
				break
			}
		}
		stop := min(end+diffContext+1, len(all))
		var na, nb int
		for _, l := range all[start:stop] {
			if l.op != '+' {
				na++
			}
			if l.op != '-' {
				nb++
			}
		}
		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n", all[start].ai, na, all[start].bi, nb)
		for _, l := range all[start:stop] {
			op := l.op
			if op == '=' {
				op = ' '
			}
			out.WriteByte(op)
			out.WriteString(l.text)
			out.WriteByte('\n')
		}
		i = stop
	}
	return strings.TrimSuffix(out.String(), "\n")
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// diffOps is an edit script from a to b ('=', '-', '+' per line), from
// their longest common subsequence.
func diffOps(a, b []string) []byte {
	n, m := len(a), len(b)
	// lcs[i][j] is the LCS length of a[i:] and b[j:], in one slice.
	lcs := make([]int32, (n+1)*(m+1))
	at := func(i, j int) int32 { return lcs[i*(m+1)+j] }
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i*(m+1)+j] = at(i+1, j+1) + 1
			} else {
				lcs[i*(m+1)+j] = max(at(i+1, j), at(i, j+1))
			}
		}
	}
	ops := make([]byte, 0, n+m)
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			ops = append(ops, '=')
			i++
			j++
		case at(i+1, j) >= at(i, j+1):
			ops = append(ops, '-')
			i++
		default:
			ops = append(ops, '+')
			j++
		}
	}
	for ; i < n; i++ {
		ops = append(ops, '-')
	}
	for ; j < m; j++ {
		ops = append(ops, '+')
	}
	return ops
}

// resultText is the text of a tool result message's blocks.
func resultText(blocks []content.Block) string {
	var b strings.Builder
	for _, bl := range blocks {
		if bl.Type == content.TypeToolResult {
			b.WriteString(content.JoinText(bl.Content))
		} else if bl.Type == content.TypeText {
			b.WriteString(bl.Text)
		}
	}
	return b.String()
}

// maxToolOutput bounds the result text a tool entry keeps.
const maxToolOutput = 64 << 10

// foldedLines is how many lines of a result or a diff show while folded.
const foldedLines = 6

// renderTool draws a tool entry: its mark and summary, then its diff or
// its output, folded to foldedLines unless expanded (bash's output shows
// its tail, the rest their head).
func (e *entry) renderTool(st *styles, width int, expand bool) string {
	mark, style := "●", st.dim
	switch e.status {
	case "":
		mark = "◌"
	case "ok":
		style = st.ok
	default:
		style = st.err
	}
	head := oneLine(e.text, width-4)
	if e.status != "" && e.status != "ok" {
		head = oneLine(e.text, width-len(e.status)-6) + " · " + e.status
	}
	out := style.Render(mark) + " " + head
	body, tail, diff := e.diff, false, true
	if body == "" || (e.status != "" && e.status != "ok") {
		body, tail, diff = strings.TrimRight(e.output, "\n"), e.tool == "bash", false
	}
	if body == "" {
		return out
	}
	lines := strings.Split(body, "\n")
	hidden := 0
	if !expand && len(lines) > foldedLines {
		hidden = len(lines) - foldedLines
		if tail {
			lines = lines[hidden:]
		} else {
			lines = lines[:foldedLines]
		}
	}
	var b strings.Builder
	b.WriteString(out)
	more := func() {
		if hidden > 0 {
			b.WriteString("\n    " + st.dim.Render(fmt.Sprintf("… %d more lines (ctrl+o expands)", hidden)))
		}
	}
	if tail {
		more()
	}
	for i, l := range lines {
		prefix := "    "
		if i == 0 {
			prefix = "  ⎿ "
		}
		l = ansiTruncate(l, width-4)
		switch {
		case !diff:
			l = st.dim.Render(l)
		case strings.HasPrefix(l, "@@"):
			l = st.note.Render(l)
		case strings.HasPrefix(l, "+"):
			l = st.ok.Render(l)
		case strings.HasPrefix(l, "-"):
			l = st.err.Render(l)
		}
		b.WriteString("\n" + prefix + l)
	}
	if !tail {
		more()
	}
	return b.String()
}
