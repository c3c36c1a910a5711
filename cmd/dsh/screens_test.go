package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/llmtest"
	"github.com/dsh-go/dsh/internal/termtest"
)

// The README's "Screens" section holds text captures of the interactive
// mode, each between <!-- screen:NAME --> and <!-- /screen --> markers.
// TestREADMEScreens captures them again through the real binary on a pty
// against the loopback model and fails when the README's differ;
// scripts/screens.sh (DSH_UPDATE_SCREENS=1) writes them into the README.

// screenWidth and screenHeight are the captured terminal's size.
const screenWidth, screenHeight = 80, 24

// screenPlaceholders are the ids a capture shows, in order of appearance,
// for the random ones of a run.
var screenPlaceholders = []string{"4be1c2d9", "7a03f6e8", "c5d81b20", "e92f4a67", "18bd3c05"}

var (
	screenUUID     = regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	screenShortID  = regexp.MustCompile(`\b[0-9a-f]{8}\b`)
	screenDuration = regexp.MustCompile(`\b(\d+m)?\d+(\.\d+)?(ms|s)\b`)
)

// normalizeScreen makes a capture reproducible: the working directory, the
// session's and children's ids (named in seen, shared by the captures of
// one session) and the elapsed times become fixed text, and the empty rows
// above the first line go.
func normalizeScreen(screen, dir string, seen map[string]string) string {
	screen = strings.ReplaceAll(screen, dir, "/home/you/project")
	name := func(id string) string {
		if p, ok := seen[id]; ok {
			return p
		}
		p := fmt.Sprintf("%08x", len(seen))
		if len(seen) < len(screenPlaceholders) {
			p = screenPlaceholders[len(seen)]
		}
		seen[id] = p
		return p
	}
	screen = screenUUID.ReplaceAllStringFunc(screen, func(id string) string {
		return name(id[:8]) + "-0000-4000-8000-000000000000"
	})
	screen = screenShortID.ReplaceAllStringFunc(screen, func(id string) string {
		if !strings.ContainsAny(id, "0123456789") || slices.Contains(screenPlaceholders, id) {
			return id
		}
		return name(id)
	})
	screen = screenDuration.ReplaceAllString(screen, "2s")
	return strings.Trim(screen, "\n") + "\n"
}

// settledScreen waits until the screen satisfies ok and then stays the
// same for a moment (a frame drawn whole), and returns it normalised.
func settledScreen(s *tuiSession, seen map[string]string, what string, ok func(screen string) bool) string {
	s.t.Helper()
	for deadline := time.Now().Add(termtest.Timeout); ; {
		screen := s.term.WaitFor(what, ok)
		time.Sleep(300 * time.Millisecond)
		if again := s.term.Screen(); again == screen {
			return normalizeScreen(screen, s.dir, seen)
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the screen showing %s never settled:\n%s", what, s.term.Screen())
		}
	}
}

// captureScreens drives dsh through the screens the README shows and
// returns their normalised text by name.
func captureScreens(t *testing.T) map[string]string {
	shots := map[string]string{}

	// A delegation in flight: a child delegating to its own child, which
	// is still thinking; then the running child's transcript opened.
	s := startTUI(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case r.Child && strings.Contains(r.LastUser, "run the tests") && len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "read_file", Arguments: `{"path":"notes.txt"}`}}
		case r.Child && strings.Contains(r.LastUser, "run the tests"):
			return llmtest.Reply{Text: "The notes say alpha; running the suite next…", Hang: true}
		case r.Child && len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"tests","prompt":"run the tests"}`}}
		case r.Child:
			return llmtest.Reply{Text: "Waiting", Hang: true}
		case len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent", Arguments: `{"description":"review","prompt":"review the change"}`}}
		}
		return llmtest.Reply{Text: "Done."}
	}, map[string]string{"notes.txt": "alpha\n"}, screenWidth, screenHeight)
	seen := map[string]string{}
	s.send("review the change")
	shots["delegation"] = settledScreen(s, seen, "two running children", func(screen string) bool {
		return regexp.MustCompile(`(?m)spawn · tests · running \S+ · \d+ tokens$`).MatchString(screen) &&
			regexp.MustCompile(`(?m)spawn · review · [0-9a-f]{8} · running .* · subagent`).MatchString(screen)
	})
	s.term.Type(termtest.Tab)
	s.term.WaitText("Enter opens")
	s.term.Type(termtest.Tab)
	s.term.WaitText("Enter opens spawn · tests's transcript")
	s.term.Type(termtest.Enter)
	shots["child"] = settledScreen(s, seen, "the child's transcript", func(screen string) bool {
		return strings.Contains(screen, "a child's transcript · esc returns") && strings.Contains(screen, "running the suite next")
	})

	// An edit: the ask box with its diff, then the result in the
	// transcript, then the slash menu.
	s = startTUI(t, func(r llmtest.Request) llmtest.Reply {
		if len(r.ToolResults) == 0 {
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "edit_file",
				Arguments: `{"path":"main.go","old_string":"\tfmt.Println(\"hello\")\n","new_string":"\tfmt.Println(\"hello, world\")\n"}`}}
		}
		return llmtest.Reply{Text: "The greeting now says **hello, world**."}
	}, map[string]string{"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n"}, screenWidth, screenHeight)
	seen = map[string]string{}
	s.send("greet the world")
	shots["ask"] = settledScreen(s, seen, "the ask box", func(screen string) bool {
		return strings.Contains(screen, "the main agent wants to run edit_file") && strings.Contains(screen, "· working ")
	})
	s.term.Type("y")
	shots["diff"] = settledScreen(s, seen, "the answer", func(screen string) bool {
		return strings.Contains(screen, "hello, world") && strings.Contains(screen, "The greeting") && strings.Contains(screen, "· ready ")
	})
	s.term.Type("/")
	shots["slash"] = settledScreen(s, seen, "the slash menu", func(screen string) bool { return strings.Contains(screen, "start a new conversation") })
	return shots
}

// screenBlock matches one capture in the README.
var screenBlock = regexp.MustCompile("(?s)<!-- screen:([a-z]+) -->\n```text\n(.*?)```\n<!-- /screen -->")

// The README's captures of the main screens are what dsh shows today.
func TestREADMEScreens(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	shots := captureScreens(t)
	found := map[string]bool{}
	updated := screenBlock.ReplaceAllFunc(readme, func(block []byte) []byte {
		name := string(screenBlock.FindSubmatch(block)[1])
		found[name] = true
		shot, ok := shots[name]
		if !ok {
			t.Errorf("README has a capture %q that the test does not take", name)
			return block
		}
		return []byte("<!-- screen:" + name + " -->\n```text\n" + shot + "```\n<!-- /screen -->")
	})
	for name := range shots {
		if !found[name] {
			t.Errorf("README has no <!-- screen:%s --> block", name)
		}
	}
	if os.Getenv("DSH_UPDATE_SCREENS") == "1" {
		if err := os.WriteFile("../../README.md", updated, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(updated, readme) {
		for _, m := range screenBlock.FindAllSubmatch(readme, -1) {
			if name := string(m[1]); shots[name] != "" && shots[name] != string(m[2]) {
				t.Errorf("README's capture %q is stale (run scripts/screens.sh); dsh shows now:\n%s", name, shots[name])
			}
		}
	}
}
