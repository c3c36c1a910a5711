package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/llm"
)

// Divergence is a live request that the recording does not answer: it
// differs from the recorded request at that step, or has no recorded
// counterpart.
type Divergence struct {
	// Session is the recorded session (nil when none could be bound).
	Session *Session
	// Live is the id of the live session that made the request.
	Live       string
	Turn, Step int
	// Detail says what differs: the first differing part of the request,
	// with the recorded and the live text around it.
	Detail string
}

func (d *Divergence) Error() string {
	where := "live session " + short(d.Live)
	if d.Session != nil {
		where = d.Session.Label()
	}
	if d.Turn > 0 {
		where += fmt.Sprintf(", turn %d step %d", d.Turn, d.Step)
	}
	return "replay diverged: " + where + ": " + d.Detail
}

// ErrorCode returns CodeDiverged.
func (d *Divergence) ErrorCode() string { return CodeDiverged }

// normalizer rewrites the text of one side of a comparison: the session's
// working directory becomes {{cwd}}, so that a recording replays in
// another directory, and each id (a UUID: a session, a child, a run)
// becomes {{id:N}}, numbered in the order the ids first appear, since a
// re-run mints new ones. It is stateful: one per side and comparison.
type normalizer struct {
	cwd   string
	ids   []string // in order of appearance
	index map[string]int
}

func newNormalizer(cwd string) *normalizer { return &normalizer{cwd: cwd} }

// uuidPattern matches the ids dsh mints.
var uuidPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
})

func (n *normalizer) text(s string) string {
	if n.cwd != "" && n.cwd != "/" {
		s = strings.ReplaceAll(s, n.cwd, "{{cwd}}")
	}
	return uuidPattern().ReplaceAllStringFunc(s, func(id string) string {
		i, ok := n.index[id]
		if !ok {
			if n.index == nil {
				n.index = map[string]int{}
			}
			i = len(n.ids)
			n.index[id], n.ids = i, append(n.ids, id)
		}
		return fmt.Sprintf("{{id:%d}}", i)
	})
}

// diffRequests describes the first difference between the recorded and the
// live request, or returns "" when the model would see the same request.
// Message ids and sources are not compared: the model does not see them.
func diffRequests(rec Request, rn *normalizer, live *llm.Request, ln *normalizer) string {
	switch {
	case rec.Provider != live.Provider || rec.Model != live.Model:
		return fmt.Sprintf("the model route differs: recorded %s/%s, live %s/%s", rec.Provider, rec.Model, live.Provider, live.Model)
	case rec.MaxTokens != live.MaxTokens:
		return fmt.Sprintf("max tokens differ: recorded %d, live %d", rec.MaxTokens, live.MaxTokens)
	}
	if d := diffText(rn.text(rec.System), ln.text(live.System)); d != "" {
		return "the system prompt differs" + d
	}
	if d := diffTools(rec.Tools, rn, live.Tools, ln); d != "" {
		return d
	}
	return diffMessages(rec.Messages, rn, live.Messages, ln)
}

func diffTools(rec []content.ToolSpec, rn *normalizer, live []content.ToolSpec, ln *normalizer) string {
	for i := range max(len(rec), len(live)) {
		switch {
		case i >= len(live):
			return fmt.Sprintf("tool %d %q is missing (the recording had %d tools, the live request %d)", i, rec[i].Name, len(rec), len(live))
		case i >= len(rec):
			return fmt.Sprintf("tool %d %q is new (the recording had %d tools, the live request %d)", i, live[i].Name, len(rec), len(live))
		case rec[i].Name != live[i].Name:
			return fmt.Sprintf("tool %d is %q in the recording, %q live", i, rec[i].Name, live[i].Name)
		}
		if d := diffText(rn.text(rec[i].Description), ln.text(live[i].Description)); d != "" {
			return fmt.Sprintf("tool %q: its description differs%s", rec[i].Name, d)
		}
		if d := diffText(canonical(rec[i].Parameters), canonical(live[i].Parameters)); d != "" {
			return fmt.Sprintf("tool %q: its parameters differ%s", rec[i].Name, d)
		}
	}
	return ""
}

// canonical re-encodes JSON so that formatting does not count.
func canonical(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func diffMessages(rec []content.Message, rn *normalizer, live []content.Message, ln *normalizer) string {
	for i := range max(len(rec), len(live)) {
		switch {
		case i >= len(live):
			return fmt.Sprintf("message %d (%s) is missing: the recorded request had %d messages, the live one %d; recorded:%s",
				i, describe(rec[i]), len(rec), len(live), quote(rn.text(renderMessage(rec[i]))))
		case i >= len(rec):
			return fmt.Sprintf("message %d (%s) is new: the recorded request had %d messages, the live one %d; live:%s",
				i, describe(live[i]), len(rec), len(live), quote(ln.text(renderMessage(live[i]))))
		}
		r, l := rn.text(renderMessage(rec[i])), ln.text(renderMessage(live[i]))
		if rec[i].Role != live[i].Role || r != l {
			return fmt.Sprintf("message %d (%s) differs%s", i, describe(rec[i]), diffText(string(rec[i].Role)+" "+r, string(live[i].Role)+" "+l))
		}
	}
	return ""
}

// describe names a message by its role and what it holds.
func describe(m content.Message) string {
	for _, b := range m.Content {
		switch b.Type {
		case content.TypeToolResult:
			return "the result of tool call " + b.ToolCallID
		case content.TypeToolCall:
			return string(m.Role) + " calling " + b.Name
		}
	}
	return string(m.Role)
}

// renderMessage writes what a model sees of a message, one block per line.
func renderMessage(m content.Message) string {
	var sb strings.Builder
	renderBlocks(&sb, m.Content)
	return sb.String()
}

func renderBlocks(sb *strings.Builder, blocks []content.Block) {
	for i, b := range blocks {
		if i > 0 {
			sb.WriteByte('\n')
		}
		switch b.Type {
		case content.TypeText:
			sb.WriteString(b.Text)
		case content.TypeReasoning:
			fmt.Fprintf(sb, "[reasoning] %s", b.Text)
		case content.TypeToolCall:
			fmt.Fprintf(sb, "[call %s %s] %s", b.ID, b.Name, b.Arguments)
		case content.TypeToolResult:
			fmt.Fprintf(sb, "[result %s error=%t] ", b.ToolCallID, b.IsError)
			renderBlocks(sb, b.Content)
		case content.TypeImage:
			if b.Image != nil {
				fmt.Fprintf(sb, "[image %s]", b.Image.ID)
			}
		default:
			fmt.Fprintf(sb, "[%s]", b.Type)
		}
	}
}

// The context shown on each side of a difference.
const diffContext = 60

// diffText returns "" when a and b are equal, else where they first differ
// and the recorded (a) and live (b) text around that place, quoted.
func diffText(a, b string) string { return diffWith(a, b, quoteInline) }

// diffWith is diffText showing the excerpts through show.
func diffWith(a, b string, show func(string) string) string {
	if a == b {
		return ""
	}
	p := commonPrefix(a, b)
	line := 1 + strings.Count(a[:p], "\n")
	from := p - diffContext
	for from > 0 && !utf8.RuneStart(a[from]) {
		from--
	}
	from = max(from, 0)
	if nl := strings.LastIndexByte(a[from:p], '\n'); nl >= 0 { // start at the differing line
		from += nl + 1
	}
	excerpt := func(s string) string {
		end := min(p+diffContext, len(s))
		for end < len(s) && !utf8.RuneStart(s[end]) {
			end++
		}
		out := s[from:end]
		if end < len(s) {
			out += "…"
		}
		if from > 0 {
			out = "…" + out
		}
		return out
	}
	return fmt.Sprintf(" at line %d, byte %d:\n  recorded: %s\n  live:     %s", line, p, show(excerpt(a)), show(excerpt(b)))
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			for i > 0 && !utf8.RuneStart(a[i]) {
				i--
			}
			return i
		}
	}
	return n
}

// quoteInline shows text on one line, its newlines and quotes escaped.
func quoteInline(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

func quote(s string) string { return " " + quoteInline(clipRunes(s, 2*diffContext)) }

func clipRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
