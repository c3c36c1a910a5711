package subagent_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// fakeUpstream is the count of a parent process: it grants up to room
// places, then refuses; with fail it does not answer at all.
type fakeUpstream struct {
	mu               sync.Mutex
	room, held, asks int
	fail             bool
}

func (u *fakeUpstream) acquire() (func(), error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.asks++
	switch {
	case u.fail:
		return nil, errors.New("method not found")
	case u.held >= u.room:
		return nil, &subagent.Error{Code: subagent.CodeLimitReached, Msg: "the parent's tree is full"}
	}
	u.held++
	var once sync.Once
	return func() {
		once.Do(func() {
			u.mu.Lock()
			u.held--
			u.mu.Unlock()
		})
	}, nil
}

func (u *fakeUpstream) state() (held, asks int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.held, u.asks
}

// admitAll admits children of f's parent until one is refused, and
// returns the admissions and the refusal.
func admitAll(f *fixture, max int) ([]*subagent.Admission, error) {
	var adms []*subagent.Admission
	for range max {
		a, err := f.svc.Admit("p", f.req("x"))
		if err != nil {
			return adms, err
		}
		adms = append(adms, a)
	}
	return adms, nil
}

// A tree whose parent is in another process takes each place in that
// process's count too: its refusal is LIMIT_REACHED with the parent's
// message and undoes the local count; a release gives both places back.
func TestUpstreamCountsEveryStart(t *testing.T) {
	f := newFixture(t, 0, agent.Options{})
	f.register(&subagenttest.Provider{ProviderName: "p"})
	f.svc.LimitLiveChildren(10)
	up := &fakeUpstream{room: 2}
	remove := f.svc.CountUpstream(f.parent, 0, up.acquire)
	adms, err := admitAll(f, 5)
	if len(adms) != 2 || !errors.Is(err, subagent.ErrLimitReached) || !strings.Contains(err.Error(), "the parent's tree is full") {
		t.Fatalf("admitted %d, then %v; want 2, then the parent's LIMIT_REACHED", len(adms), err)
	}
	adms[0].Release()
	adms[0].Release()
	if held, _ := up.state(); held != 1 {
		t.Fatalf("the parent holds %d places after a release, want 1", held)
	}
	more, _ := admitAll(f, 1)
	if held, _ := up.state(); len(more) != 1 || held != 2 {
		t.Fatalf("a freed place was not taken again (admitted %d, parent holds %d)", len(more), held)
	}
	for _, a := range append(adms[1:], more...) {
		a.Release()
	}
	remove()
	adms, err = admitAll(f, 10)
	if _, asks := up.state(); len(adms) != 10 || err != nil || asks != 4 {
		t.Fatalf("after remove: admitted %d (%v), parent asked %d times; want 10 admitted locally, no more asks", len(adms), err, asks)
	}
	for _, a := range adms {
		a.Release()
	}
}

// A parent that does not answer (an older dsh) is asked once; the tree
// then holds to its own cap, narrowed by the parent's.
func TestUpstreamThatDoesNotAnswerFallsBackToTheLocalCap(t *testing.T) {
	f := newFixture(t, 0, agent.Options{})
	f.register(&subagenttest.Provider{ProviderName: "p"})
	f.svc.LimitLiveChildren(10)
	up := &fakeUpstream{fail: true}
	f.svc.CountUpstream(f.parent, 3, up.acquire)
	adms, err := admitAll(f, 5)
	if _, asks := up.state(); len(adms) != 3 || !errors.Is(err, subagent.ErrLimitReached) || asks != 1 {
		t.Fatalf("admitted %d, then %v, asking the parent %d times; want 3 (the parent's cap), LIMIT_REACHED, 1 ask", len(adms), err, asks)
	}
	for _, a := range adms {
		a.Release()
	}
}

// A provider is given the tree's cap and the means to count its child's
// own children against it.
func TestLiveSlotsCountAgainstTheTree(t *testing.T) {
	f := newFixture(t, 0, agent.Options{})
	p := &subagenttest.Provider{ProviderName: "p", Default: subagenttest.Script{Hang: true}}
	f.register(p)
	f.svc.LimitLiveChildren(3)
	run, err := f.svc.Start(context.Background(), "p", f.req("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer run.Dispose(context.Background())
	slots := p.Requests()[0].LiveSlots
	if slots == nil || slots.Max() != 3 {
		t.Fatalf("the provider was given %+v, want the cap 3", slots)
	}
	var releases []func()
	for range 2 {
		release, err := slots.Acquire()
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	if _, err := slots.Acquire(); !errors.Is(err, subagent.ErrLimitReached) {
		t.Fatalf("a fourth place in a tree capped at 3: %v", err)
	}
	if _, err := f.svc.Admit("p", f.req("y")); !errors.Is(err, subagent.ErrLimitReached) {
		t.Fatalf("the tree admitted a child past its cap: %v", err)
	}
	releases[0]()
	releases[0]()
	a, err := f.svc.Admit("p", f.req("y"))
	if err != nil {
		t.Fatalf("a released place was not given back: %v", err)
	}
	a.Release()
	releases[1]()
}
