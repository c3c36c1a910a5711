package task

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
)

func TestTail(t *testing.T) {
	for _, tc := range []struct {
		s     string
		limit int
		want  string
	}{
		{"", 5, ""},
		{"abc", 3, "abc"},
		{"abcdef", 3, "[… 3 bytes omitted …]\ndef"},
		// The cut never splits a rune: it moves forward to the next start.
		{"aé", 1, "[… 3 bytes omitted …]\n"},
		{"a€b", 2, "[… 4 bytes omitted …]\nb"},
		{"a€b", 4, "[… 1 bytes omitted …]\n€b"},
		{"日本語", 6, "[… 3 bytes omitted …]\n本語"},
		{"日本語", 5, "[… 6 bytes omitted …]\n語"},
	} {
		if got := tail(tc.s, tc.limit); got != tc.want {
			t.Errorf("tail(%q, %d) = %q, want %q", tc.s, tc.limit, got, tc.want)
		}
	}
	long := strings.Repeat("x", 40000) + "END"
	if got := tail(long, 30000); !strings.HasPrefix(got, "[… 10003 bytes omitted …]\n") || !strings.HasSuffix(got, "END") ||
		len(got)-len("[… 10003 bytes omitted …]\n") != 30000 {
		t.Errorf("tail of a long output keeps %d bytes", len(got))
	}
}

func TestToolOptionsDefaults(t *testing.T) {
	var o ToolOptions
	o.defaults()
	if o.WaitTimeout.Seconds() != 30 || o.MaxWaitTimeout.Minutes() != 10 || o.OutputLimit != 30000 || o.MaxWakes != 3 {
		t.Fatalf("defaults %+v", o)
	}
	o = ToolOptions{WaitTimeout: 1, MaxWaitTimeout: 2, OutputLimit: 3, MaxWakes: 4}
	o.defaults()
	if o != (ToolOptions{WaitTimeout: 1, MaxWaitTimeout: 2, OutputLimit: 3, MaxWakes: 4}) {
		t.Fatalf("set options changed: %+v", o)
	}
}

// logBuilder builds session logs for wakesSinceUser.
type logBuilder struct {
	events []session.Event
	turn   int
}

func (b *logBuilder) add(typ string, data any) *logBuilder {
	b.events = append(b.events, session.Event{Seq: int64(len(b.events)), Type: typ, Data: data})
	return b
}

func (b *logBuilder) msg(m content.Message) *logBuilder { return b.add(session.TypeUserMessage, m) }

func (b *logBuilder) splice() *logBuilder {
	return b.add(session.TypeInboxSpliced, session.InboxSpliced{Target: "next-step", Inserted: []content.Message{notice()}})
}

// turnOf logs a whole turn whose steps claimed the given messages; every
// step but the last made a tool call, which is what ran the next one.
func (b *logBuilder) turnOf(steps ...[]content.Message) *logBuilder { return b.turnWith(false, steps) }

// splicedTurnOf logs a whole turn whose every step answered without a tool
// call: each later step ran only because of the messages it claimed.
func (b *logBuilder) splicedTurnOf(steps ...[]content.Message) *logBuilder {
	return b.turnWith(true, steps)
}

func (b *logBuilder) turnWith(answered bool, steps [][]content.Message) *logBuilder {
	b.turn++
	b.add(session.TypeTurnStart, session.TurnStart{Turn: b.turn})
	for i, msgs := range steps {
		b.add(session.TypeStepStart, session.Step{Turn: b.turn, Step: i + 1})
		for _, m := range msgs {
			b.msg(m)
		}
		var blocks []content.Block
		if !answered && i < len(steps)-1 {
			blocks = []content.Block{content.ToolCall("c", "bash", "{}")}
		}
		b.add(session.TypeAssistantMessage, session.AssistantMessage{Turn: b.turn, Step: i + 1,
			Message: content.AssistantMessage("p", "m", blocks)})
		b.add(session.TypeStepEnd, session.Step{Turn: b.turn, Step: i + 1})
	}
	return b.add(session.TypeTurnEnd, session.TurnEnd{Turn: b.turn})
}

func notice() content.Message {
	return Notice(Snapshot{ID: "bash-1", Kind: "bash", Label: "l", Status: Completed})
}

func user() content.Message { return content.UserText("hi") }

func msgs(m ...content.Message) []content.Message { return m }

func TestWakesSinceUser(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  *logBuilder
		want int
		bug  string
	}{
		{"empty log", &logBuilder{}, 0, ""},
		{"user turns only", new(logBuilder).turnOf(msgs(user())).turnOf(msgs(user())), 0, ""},
		{"one notice turn", new(logBuilder).turnOf(msgs(notice())), 1, ""},
		{"notice turns after a user turn", new(logBuilder).turnOf(msgs(notice())).turnOf(msgs(user())).
			turnOf(msgs(notice())).turnOf(msgs(notice())), 2, ""},
		{"a notice joining a later step opens no turn", new(logBuilder).turnOf(msgs(user()), msgs(notice())), 0, ""},
		{"a notice joining a later step of a notice turn", new(logBuilder).turnOf(msgs(notice()), msgs(notice())), 1, ""},
		{"a user message joining a notice turn resets", new(logBuilder).turnOf(msgs(notice())).
			turnOf(msgs(notice()), msgs(user())), 0, ""},
		{"two notices joining a later step open no turn", new(logBuilder).turnOf(msgs(user()), msgs(notice(), notice())), 0, ""},
		// A notice spliced into a turn whose model had answered keeps the
		// turn going for another model call: that counts as a wake.
		{"a notice continuing an answered turn", new(logBuilder).splicedTurnOf(msgs(user()), msgs(notice())), 1, ""},
		{"notices continuing an answered turn, step after step", new(logBuilder).splicedTurnOf(msgs(user()), msgs(notice()),
			msgs(notice(), notice()), msgs(notice())), 3, ""},
		{"a user message continuing an answered turn resets", new(logBuilder).splicedTurnOf(msgs(notice()), msgs(notice()),
			msgs(user())), 0, ""},
		{"a notice outside any step opens no turn", new(logBuilder).turnOf(msgs(notice())).
			add(session.TypeTurnStart, session.TurnStart{Turn: 2}).msg(notice()), 1, ""},
		{"a lone notice at the start of the log", new(logBuilder).msg(notice()), 0, ""},
		{"a pending injected notice is no wake", new(logBuilder).turnOf(msgs(notice())).splice(), 1, ""},
		{"other plugin messages are ignored", new(logBuilder).turnOf(msgs(notice())).turnOf(msgs(func() content.Message {
			m := user()
			m.Source = content.Source{Kind: content.SourcePlugin, Plugin: "other"}
			return m
		}())), 1, ""},

		// Two notices claimed by the same opening step (a Followup plus an
		// Inject that arrived before the driver claimed its turn) opened
		// one turn, not two.
		{"two notices opening one turn", new(logBuilder).turnOf(msgs(notice(), notice())), 1, ""},
		// A turn whose opening step also claimed a user message was not
		// opened by a notice alone; claimTurn logs step items (a Steer'd
		// user message) before the next-turn item (a Followup'd notice).
		{"user and notice opening one turn", new(logBuilder).turnOf(msgs(user(), notice())), 0, ""},
		// Another goroutine's Inject/Followup may log agent/inbox/spliced
		// between step/start and the claimed messages: opensTurn then says
		// the notice opened no turn and the budget is not spent.
		{"a splice between step/start and the notice", new(logBuilder).add(session.TypeTurnStart, session.TurnStart{Turn: 1}).
			add(session.TypeStepStart, session.Step{Turn: 1, Step: 1}).splice().msg(notice()), 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := wakesSinceUser(tc.log.events); got != tc.want {
				t.Fatalf("wakesSinceUser = %d, want %d", got, tc.want)
			}
		})
	}
}
