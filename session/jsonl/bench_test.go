package jsonl

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
)

// BenchmarkAppend measures appending through a live session to a JSONL file
// in steps of 20 events: step/start, 18 text chunks, step/end (which
// flushes). A new session starts every 50,000 events.
func BenchmarkAppend(b *testing.B) {
	bk := New(b.TempDir())
	var s *session.Session
	detach := func() error { return nil }
	chunk := session.AssistantChunk{Turn: 1, Chunk: content.Chunk{Type: content.ChunkTextDelta, Text: "a streamed delta of typical size, "}}
	n, step := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		if n%50_000 == 0 {
			b.StopTimer()
			if err := detach(); err != nil {
				b.Fatal(err)
			}
			var err error
			s, detach, err = session.NewStore(bk, nil).Create(session.CreateOptions{ID: fmt.Sprint("bench", n), Cwd: "/w"})
			if err != nil {
				b.Fatal(err)
			}
			mustAppend(b, s, session.TypeTurnStart, session.TurnStart{Turn: 1})
			b.StartTimer()
		}
		var err error
		switch n % 20 {
		case 0:
			step++
			_, err = s.Append(session.TypeStepStart, session.Step{Turn: 1, Step: step})
		case 19:
			_, err = s.Append(session.TypeStepEnd, session.Step{Turn: 1, Step: step})
		default:
			chunk.Step = int32(step)
			_, err = s.Append(session.TypeAssistantChunk, chunk)
		}
		if err != nil {
			b.Fatal(err)
		}
		n++
	}
	if err := detach(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkLoad100k measures loading a 100,000-event session file.
func BenchmarkLoad100k(b *testing.B) {
	const total = 100_000
	events := memLog(b, func(s *session.Session) {
		for turn := 1; s.Len() < total-20; turn++ {
			appendTurn(b, s, turn)
		}
		for s.Len() < total {
			mustAppend(b, s, "todo/write", json.RawMessage(`{"todos":[]}`))
		}
	})
	root := b.TempDir()
	bk := New(root)
	h := session.Header{ID: "big", Cwd: "/w", CreatedAt: 1}
	p, err := bk.Create(h)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(events); i += 1000 {
		if err := p.Append(events[i:min(i+1000, len(events))]); err != nil {
			b.Fatal(err)
		}
	}
	p.Close()
	b.SetBytes(fileSize(b, bk.Path(h)))
	b.ReportAllocs()
	for b.Loop() {
		_, got, p, err := bk.Load("big")
		if err != nil || len(got) != total {
			b.Fatalf("Load: %d events, %v", len(got), err)
		}
		p.Close()
	}
	b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
