package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/task"
)

// The feed never makes an emitter wait: with nobody reading, lossy items
// past the bound are dropped and counted, the others are all kept, in
// order; after close, pushes are refused.
func TestFeedIsBoundedForLossyItemsOnly(t *testing.T) {
	f := newFeed(10)
	for i := range 1000 {
		f.push(i, true)
	}
	f.push("turn end", false)
	f.push("child end", false)
	items, dropped := f.take()
	if len(items) != 12 || dropped != 990 || items[0] != 0 || items[9] != 9 || items[10] != "turn end" || items[11] != "child end" {
		t.Fatalf("took %d items %v…, dropped %d; want the first 10, then both essential ones, 990 dropped", len(items), items[:min(len(items), 12)], dropped)
	}
	if len(f.ready) != 1 {
		t.Fatal("the feed did not announce its items")
	}
	f.close()
	if f.push("late", false) || f.push("late", true) {
		t.Fatal("a closed feed took an item")
	}
	if items, _ := f.take(); len(items) != 0 {
		t.Fatalf("a closed feed holds %v", items)
	}
}

// The screen takes the feed at most once a frame: a model streaming a
// delta a millisecond builds ~60 views a second, not 1,000, and every
// delta is still shown.
func TestPumpTakesTheFeedOnceAFrame(t *testing.T) {
	u := &UI{feed: newFeed(feedLimit)}
	var mu sync.Mutex
	var batches, items int
	send := func(msg tea.Msg) {
		if b, ok := msg.(batchMsg); ok {
			mu.Lock()
			batches++
			items += len(b.items)
			mu.Unlock()
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { u.pump(context.Background(), send, stop) })
	defer func() { close(stop); wg.Wait() }()
	const n = 300
	start := time.Now()
	for i := range n {
		u.feed.push(i, true)
		time.Sleep(time.Millisecond)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		got := items
		mu.Unlock()
		if got == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d items reached the screen", got, n)
		}
	}
	elapsed := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	if most := int(elapsed/frame) + 1; batches > most {
		t.Errorf("%d batches in %v: more than one a frame (%d)", batches, elapsed, most)
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"plain text\nline two":                       "plain text\nline two",
		"\x1b[2J\x1b[Hcleared?":                      "cleared?",
		"\x1b]52;c;cHduZWQ=\x07clipboard":            "clipboard",
		"\x1b]0;title\x1b\\after":                    "after",
		"tab\there":                                  "tab    here",
		"bell\a cr\r nul\x00 del\x7f c1\u009b end":   "bell cr nul del c1 end",
		"safe \u202eevil\u202c text":                 "safe evil text",
		"bad \xff\xfe utf8, kept \uFFFD replacement": "bad  utf8, kept \uFFFD replacement",
		"wide 漢字 and emoji 🙂":                        "wide 漢字 and emoji 🙂",
		"\x1b[31mred\x1b[0m":                         "red",
		"lone escape \x1b":                           "lone escape ",
	} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzSanitize: whatever a model or a tool writes, what reaches the screen
// holds no escape or control character but newlines, no bidirectional
// control, is valid UTF-8, and sanitizing it again changes nothing.
func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"", "hello\nworld", "\x1b[2J", "\x1b]52;c;aGk=\x07", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\",
		"\u202eabc", "\xff\xfe", "\x1bP+q\x1b\\", "a\tb\rc", "\u009b31m", "\x1b[?1049h", "💥\u200f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := sanitize(in)
		if !utf8.ValidString(out) {
			t.Fatalf("sanitize(%q) = %q: invalid UTF-8", in, out)
		}
		for _, r := range out {
			if (unicode.IsControl(r) && r != '\n') || isBidiControl(r) {
				t.Fatalf("sanitize(%q) = %q keeps %U", in, out, r)
			}
		}
		if again := sanitize(out); again != out {
			t.Fatalf("sanitize is not idempotent on %q: %q, then %q", in, out, again)
		}
		if o := oneLine(in, 40); strings.Contains(o, "\n") {
			t.Fatalf("oneLine(%q) = %q spans lines", in, o)
		}
	})
}

func TestHistory(t *testing.T) {
	var h history
	if _, ok := h.prev("draft"); ok {
		t.Fatal("an empty history went back")
	}
	h.add("one")
	h.add("two")
	h.add("two") // a repeat is kept once
	steps := []string{}
	for {
		v, ok := h.prev("my draft")
		if !ok {
			break
		}
		steps = append(steps, v)
	}
	for {
		v, ok := h.next()
		if !ok {
			break
		}
		steps = append(steps, v)
	}
	if got := strings.Join(steps, ","); got != "two,one,two,my draft" {
		t.Fatalf("browsing the history gave %s", got)
	}
	for i := range maxHistory + 10 {
		h.add(strings.Repeat("x", i+1))
	}
	if len(h.items) != maxHistory {
		t.Fatalf("the history holds %d items, want at most %d", len(h.items), maxHistory)
	}
}

func TestNewlineKeys(t *testing.T) {
	for seq, want := range map[string]bool{
		"\x1b[27;2;13~": true,  // Shift+Enter, xterm modifyOtherKeys
		"\x1b[27;5;13~": true,  // Ctrl+Enter
		"\x1b[13;2u":    true,  // Shift+Enter, fixterms / CSI u
		"\x1b[27;2;9~":  false, // Shift+Tab
		"\x1b[99;5u":    false, // Ctrl+C in CSI u
	} {
		// The terminal library shows a sequence it does not know so.
		shown := fmt.Sprintf("?CSI%+v?", []byte(seq)[2:])
		if got := isNewlineKey(shown); got != want {
			t.Errorf("isNewlineKey(%q) = %v, want %v", seq, got, want)
		}
	}
	if isNewlineKey("?CSI[bogus]?") || isNewlineKey("enter") {
		t.Error("a non-sequence counted as a newline key")
	}
}

func TestCommonPrefix(t *testing.T) {
	for _, c := range []struct {
		cands []string
		typed string
		want  string
	}{
		{[]string{"subagent-1", "subagent-12"}, "s", "subagent-1"},
		{[]string{"tasks", "output"}, "", ""},
		{[]string{"sessions", "sessions"}, "se", "sessions"},
	} {
		if got := commonPrefix(c.cands, c.typed); got != c.want {
			t.Errorf("commonPrefix(%v, %q) = %q, want %q", c.cands, c.typed, got, c.want)
		}
	}
}

// A streaming answer rewraps only its last line, and renders as the
// whole text wrapped at once would.
func TestStreamingAnswerWrapsAsTheWhole(t *testing.T) {
	st := newStyles(io.Discard, func(string) string { return "" })
	var tr transcript
	e := tr.add(entryAnswer, "")
	full := ""
	for i, delta := range strings.SplitAfter(strings.Repeat("a few words here and a longer tail\nthen a new line ", 40), " ") {
		full += delta
		e.text += delta
		tr.update(e)
		for _, w := range []int{7, 30, 80} {
			if got, want := e.render(st, w, true, false), wrap(strings.TrimRight(full, "\n"), w); got != want {
				t.Fatalf("after delta %d at width %d:\n%q\nwant\n%q", i, w, got, want)
			}
		}
	}
	tr.replace(e, "healed\nanswer")
	if got := e.render(st, 80, true, false); got != "healed\nanswer" {
		t.Fatalf("a replaced answer renders %q", got)
	}
}

// An ask waits for the person's answer; a cancelled call withdraws its
// ask from the screen; once the UI has stopped, asks are refused.
func TestAskerWithdrawsAndRefuses(t *testing.T) {
	f := newFeed(8)
	done := make(chan struct{})
	k := &asker{feed: f, done: done}
	type result struct {
		ans permission.Answer
		err error
	}
	ask1 := func(ctx context.Context) (*ask, chan result) {
		res := make(chan result, 1)
		go func() {
			ans, err := k.Ask(ctx, permission.Request{Tool: "bash"})
			res <- result{ans, err}
		}()
		<-f.ready
		items, _ := f.take()
		return items[0].(*ask), res
	}

	a, res := ask1(context.Background())
	a.reply <- permission.AllowAlways
	if r := <-res; r.ans != permission.AllowAlways || r.err != nil {
		t.Fatalf("answered ask: %v, %v", r.ans, r.err)
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	a, res = ask1(ctx)
	cancel(errors.New("the turn ended"))
	if r := <-res; r.ans != permission.Reject || r.err == nil || r.err.Error() != "the turn ended" {
		t.Fatalf("cancelled ask: %v, %v", r.ans, r.err)
	}
	if items, _ := f.take(); len(items) != 1 || items[0] != (askGone{a}) {
		t.Fatalf("the cancelled ask was not withdrawn: %v", items)
	}

	close(done)
	if ans, err := k.Ask(context.Background(), permission.Request{Tool: "bash"}); ans != permission.Reject || !errors.Is(err, errUIClosed) {
		t.Fatalf("ask after the UI stopped: %v, %v", ans, err)
	}
	f.close()
	if ans, err := k.Ask(context.Background(), permission.Request{Tool: "bash"}); ans != permission.Reject || !errors.Is(err, errUIClosed) {
		t.Fatalf("ask after the feed closed: %v, %v", ans, err)
	}
}

// A background child's row is linked to its task even when the child
// finished before its start event is handled: the running task of its
// label first, else the newest unread one; a task is linked once.
func TestChildRowLinksItsTask(t *testing.T) {
	snap := func(id string, st task.Status, reported bool) task.Snapshot {
		return task.Snapshot{ID: id, Kind: subagenttool.TaskKind, Label: "bg job", Status: st, Reported: reported}
	}
	started := func(run string) subagent.Started {
		return subagent.Started{RunInfo: subagent.RunInfo{RunID: run, ParentID: "root", Label: "bg  job"}}
	}
	oneShot := func(string) bool { return false }
	c := newChildren()
	tasks := []task.Snapshot{snap("t1", task.Completed, true), snap("t2", task.Failed, false), snap("t3", task.Completed, false)}
	if r := c.start(started("r1"), "root", tasks, oneShot, time.Now()); r.task != "t3" {
		t.Errorf("a finished child's row links %q, want the newest unread task t3", r.task)
	}
	tasks = append(tasks, snap("t4", task.Running, false))
	if r := c.start(started("r2"), "root", tasks, oneShot, time.Now()); r.task != "t4" {
		t.Errorf("a running child's row links %q, want the running task t4", r.task)
	}
	if r := c.start(started("r3"), "root", tasks[:2], oneShot, time.Now()); r.task != "t2" {
		t.Errorf("the next row links %q, want the one unread task left, t2", r.task)
	}
	if r := c.start(started("r4"), "root", tasks, oneShot, time.Now()); r.task != "" {
		t.Errorf("a row links %q, whose task already has a row", r.task)
	}
}
