package continuable_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
	"github.com/dsh-go/dsh/subagent"
)

// failingDetach is a JSONL store whose child sessions' persisters fail to
// close: a continuable child's detach fails at its teardown.
type failingDetach struct{ *jsonl.Backend }

var errDetach = errors.New("disk detached")

func (b failingDetach) Create(h session.Header) (session.Persister, error) {
	p, err := b.Backend.Create(h)
	if err != nil || h.Origin != session.OriginSubagent {
		return p, err
	}
	return failingClose{p}, nil
}

type failingClose struct{ session.Persister }

func (p failingClose) Close() error {
	_ = p.Persister.Close()
	return errDetach
}

// A teardown failure keeps a finished child's outcome and answer, and
// carries ACTIVATION_TEARDOWN_FAILED: the foreground caller reads the
// answer, and a background child's notice gives it.
func TestTeardownFailureKeepsTheAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		w := newWorld(t, dir, failingDetach{jsonl.New(dir)})
		w.provider("spawn", false)
		parent := w.newParent("")

		acc := w.start(parent, "spawn", "count the files", subagent.ContinuableOptions{Foreground: true})
		res, err := acc.Wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.StopReason != subagent.Completed || content.JoinText(res.Output) != "answer to count the files" {
			t.Errorf("foreground result %s %q %q, want completed with the answer", res.StopReason, content.JoinText(res.Output), res.Diagnostic)
		}
		var se *subagent.Error
		if !errors.Is(res.Teardown, subagent.ErrTeardownFailed) || !errors.As(res.Teardown, &se) ||
			se.ErrorCode() != "ACTIVATION_TEARDOWN_FAILED" || !errors.Is(res.Teardown, errDetach) {
			t.Errorf("teardown error %v, want ACTIVATION_TEARDOWN_FAILED wrapping the detach failure", res.Teardown)
		}

		bg := w.start(parent, "spawn", "list the dirs", subagent.ContinuableOptions{})
		ends := w.settled(2)
		w.idle(parent)
		// The foreground child's end may be announced after its waiter
		// returned: find the background child's by id.
		i := slices.IndexFunc(ends, func(e subagent.Ended) bool { return e.ChildID == bg.ChildID })
		if i < 0 || ends[i].StopReason != subagent.Completed ||
			content.JoinText(ends[i].LastAssistantMessage) != "answer to list the dirs" {
			t.Errorf("ends %+v, want %s completed with the answer", ends, bg.ChildID)
		}
		got := notices(parent, subagent.FormSettled)
		if len(got) != 1 {
			t.Fatalf("%d notices, want 1", len(got))
		}
		text := content.JoinText(got[0].Content)
		if !strings.Contains(text, "finished") || !strings.Contains(text, "Its closing message:\nanswer to list the dirs") {
			t.Errorf("notice %q, want the finished child's answer", text)
		}
	})
}

// A start whose label cannot be stored as given (not valid UTF-8) is
// refused up front, naming the label; no child is created.
func TestStartRefusesALabelItCannotStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		w := newWorld(t, dir, nil)
		w.provider("spawn", false)
		parent := w.newParent("")
		req := subagent.StartRequest{Label: "fix \xff", Prompt: []content.Block{content.Text("task")}, Parent: parent}
		_, err := w.svc.StartContinuable(context.Background(), "spawn", req, subagent.ContinuableOptions{})
		if !errors.Is(err, subagent.ErrInvalidRequest) || !strings.Contains(err.Error(), "label") {
			t.Errorf("continuable start: %v, want INVALID_REQUEST naming the label", err)
		}
		_, err = w.svc.Start(context.Background(), "spawn", req)
		if !errors.Is(err, subagent.ErrInvalidRequest) || !strings.Contains(err.Error(), "label") {
			t.Errorf("one-shot start: %v, want INVALID_REQUEST naming the label", err)
		}
		if n := len(w.agents.List()); n != 1 {
			t.Errorf("%d agents live, want the parent alone", n)
		}
	})
}
