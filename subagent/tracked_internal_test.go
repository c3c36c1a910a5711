package subagent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dsh-go/dsh/content"
)

// disposeOnly is a Run whose Dispose does nothing (the rest is not called).
type disposeOnly struct{ Run }

func (disposeOnly) Dispose(context.Context) error { return nil }

// A run whose end was announced before its Dispose makes no channel to
// wait on (one per delegation was made only to be closed); a Dispose that
// came first waits for the end, or for its ctx.
func TestTrackedDisposeWaitsWithoutAChannelOnceEnded(t *testing.T) {
	ended := &tracker{}
	ended.abandon()
	if err := (&tracked{Run: disposeOnly{}, t: ended}).Dispose(t.Context()); err != nil || ended.ended != nil {
		t.Fatalf("Dispose after the end = %v, made a channel: %v", err, ended.ended != nil)
	}
	var seen int
	(&tracked{Run: disposeOnly{}, t: ended}).AfterSettle(func(Result) { seen++ })
	if seen != 1 {
		t.Fatal("AfterSettle of an ended run did not call back at once")
	}

	early := &tracker{}
	errc := make(chan error, 1)
	go func() { errc <- (&tracked{Run: disposeOnly{}, t: early}).Dispose(t.Context()) }()
	for {
		early.mu.Lock()
		waiting := early.ended != nil
		early.mu.Unlock()
		if waiting {
			break
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-errc:
		t.Fatalf("Dispose returned %v before the end", err)
	case <-time.After(10 * time.Millisecond):
	}
	early.abandon()
	if err := <-errc; err != nil {
		t.Fatalf("Dispose woken by the end = %v", err)
	}

	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("gone")
	cancel(cause)
	if err := (&tracked{Run: disposeOnly{}, t: &tracker{}}).Dispose(ctx); !errors.Is(err, cause) {
		t.Fatalf("Dispose on an ended ctx = %v, want its cause", err)
	}
}

// steerResume is a Run that steers and resumes, recording what reached it.
type steerResume struct {
	disposeOnly
	sent    *[]string
	resumed *int
}

func (s steerResume) SendMessage(_ context.Context, msg []content.Block) error {
	*s.sent = append(*s.sent, content.JoinText(msg))
	return nil
}

func (s steerResume) Resume(context.Context, ResumeRequest) (Run, error) {
	*s.resumed++
	return nil, errors.New("no follow-up here")
}

// The tracked wrapper keeps exactly the provider's optional methods
// visible and reaching it, and costs no allocation of its own.
func TestWrapShowsTheRunsOptionalMethodsWithoutAllocating(t *testing.T) {
	var sent []string
	var resumed int
	ended := func() *tracker { return &tracker{svc: NewService(nil, nil), isEnded: true} } // Dispose need not wait
	both := &tracked{Run: steerResume{sent: &sent, resumed: &resumed}, t: ended()}
	plain := &tracked{Run: disposeOnly{}, t: ended()}
	steerOnly := &tracked{Run: struct {
		disposeOnly
		Steerer
	}{Steerer: steerResume{sent: &sent, resumed: &resumed}}, t: ended()}
	resumeOnly := &tracked{Run: struct {
		disposeOnly
		Resumer
	}{Resumer: steerResume{sent: &sent, resumed: &resumed}}, t: ended()}
	for _, c := range []struct {
		name          string
		r             *tracked
		steer, resume bool
	}{{"both", both, true, true}, {"plain", plain, false, false}, {"steer", steerOnly, true, false}, {"resume", resumeOnly, false, true}} {
		w := wrap(c.r)
		_, steers := w.(Steerer)
		_, resumes := w.(Resumer)
		_, notifies := w.(SettleNotifier)
		if steers != c.steer || resumes != c.resume || !notifies {
			t.Errorf("%s: the wrapper steers %v, resumes %v, notifies %v", c.name, steers, resumes, notifies)
		}
		if steers {
			if err := w.(Steerer).SendMessage(t.Context(), []content.Block{content.Text(c.name)}); err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
		}
		if resumes {
			if _, err := w.(Resumer).Resume(t.Context(), ResumeRequest{}); err == nil {
				t.Errorf("%s: a failed resume reported no error", c.name)
			}
		}
		if err := w.Dispose(t.Context()); err != nil {
			t.Errorf("%s: dispose: %v", c.name, err)
		}
		if n := testing.AllocsPerRun(10, func() { _ = wrap(c.r) }); n != 0 {
			t.Errorf("%s: wrap allocates %v times", c.name, n)
		}
	}
	if len(sent) != 2 || sent[0] != "both" || sent[1] != "steer" || resumed != 2 {
		t.Errorf("reached the run: sent %v, resumed %d", sent, resumed)
	}
}
