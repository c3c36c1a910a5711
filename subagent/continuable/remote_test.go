package continuable_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent"
)

// product is a fake out-of-process product that keeps conversations by id,
// as an ACP agent with session/load, Codex or Claude Code do.
type product struct {
	name      string
	canResume bool

	mu        sync.Mutex
	convs     map[string][]string // conversation → prompts so far
	processes int                 // runs started (each a fresh process)
	live      int                 // runs not yet disposed
	hang      chan struct{}       // a prompt "hang" blocks until cancelled
}

func newProduct(name string, canResume bool) *product {
	return &product{name: name, canResume: canResume, convs: map[string][]string{}, hang: make(chan struct{}, 8)}
}

func (p *product) Name() string                        { return p.name }
func (p *product) Capabilities() subagent.Capabilities { return subagent.Capabilities{} }
func (p *product) InheritsParentContext() bool         { return false }
func (p *product) Start(ctx context.Context, req subagent.StartRequest) (subagent.Run, error) {
	return p.run(ctx, req, fmt.Sprintf("conv-%d", len(p.convs)+1))
}

func (p *product) ResumeRun(ctx context.Context, req subagent.StartRequest, remote string) (subagent.Run, error) {
	if !p.canResume {
		return nil, subagent.NotResumable(p.name, "this product keeps no conversations")
	}
	p.mu.Lock()
	_, ok := p.convs[remote]
	p.mu.Unlock()
	if !ok {
		return nil, errors.New("unknown conversation " + remote)
	}
	return p.run(ctx, req, remote)
}

func (p *product) run(ctx context.Context, req subagent.StartRequest, conv string) (subagent.Run, error) {
	prompt := content.JoinText(req.Prompt)
	p.mu.Lock()
	p.convs[conv] = append(p.convs[conv], prompt)
	n := len(p.convs[conv])
	p.processes++
	p.live++
	p.mu.Unlock()
	r := &productRun{p: p, conv: conv}
	go func() {
		if prompt == "hang" {
			p.hang <- struct{}{}
			<-ctx.Done()
			r.Settle(subagent.Result{StopReason: subagent.Aborted})
			return
		}
		r.Settle(subagent.Result{StopReason: subagent.Completed, Output: []content.Block{content.Text(fmt.Sprintf("%s saw %d prompts, last %q", conv, n, prompt))},
			Usage: map[string]content.Usage{p.name + "/m": {Input: 1, Output: 1}}})
	}()
	return r, nil
}

type productRun struct {
	subagent.Settlement
	p    *product
	conv string
	once sync.Once
}

func (r *productRun) ID() string               { return "run-" + r.conv }
func (r *productRun) LocalAgent() *agent.Agent { return nil }
func (r *productRun) RemoteSession() string    { return r.conv }
func (r *productRun) Dispose(ctx context.Context) error {
	<-r.Done()
	r.once.Do(func() {
		r.p.mu.Lock()
		r.p.live--
		r.p.mu.Unlock()
	})
	return nil
}

// An out-of-process child continues by its conversation id, in this
// process and in a new one: each follow-up is a fresh run (process) that
// resumes the same remote conversation, the child's own log records each
// turn, and every activation ends with one notice; no run is left.
func TestRemoteChildContinuesByConversationID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		w := newWorld(t, dir, nil)
		prod := newProduct("remote", true)
		if _, err := w.svc.Register(prod); err != nil {
			t.Fatal(err)
		}
		if !w.svc.CanContinue("remote") {
			t.Fatal("a RemoteContinuer cannot continue")
		}
		parent := w.newParent("")
		acc := w.start(parent, "remote", "first", subagent.ContinuableOptions{})
		w.settled(1)
		w.idle(parent)
		w.followup(parent, acc.ChildID, "second")
		w.settled(2)
		w.idle(parent)
		got := notices(parent, subagent.FormSettled)
		if len(got) != 2 || !strings.Contains(content.JoinText(got[1].Content), `conv-1 saw 2 prompts, last "second"`) {
			t.Fatalf("notices %v", got)
		}
		h, events, err := w.store.Read(acc.ChildID)
		if err != nil || h.ParentSession != parent.ID() || h.Origin != session.OriginSubagent {
			t.Fatalf("the child's log: %+v %v", h, err)
		}
		ds := descriptors(t, events)
		if len(ds) != 1 || ds[0].Remote != "conv-1" || ds[0].Provider != "remote" || ds[0].Mode != subagent.Continuable {
			t.Errorf("descriptors %+v", ds)
		}
		var turns []string
		for _, e := range events {
			if m, ok := e.Data.(content.Message); ok && e.Type == session.TypeUserMessage {
				turns = append(turns, content.JoinText(m.Content))
			}
		}
		if strings.Join(turns, ",") != "first,second" {
			t.Errorf("the child's log records %q", turns)
		}
		w.close()

		second := newWorld(t, dir, nil)
		if _, err := second.svc.Register(prod); err != nil {
			t.Fatal(err)
		}
		resumed := second.newParent(parent.ID())
		second.followup(resumed, acc.ChildID, "third")
		second.settled(1)
		second.idle(resumed)
		if got := notices(resumed, subagent.FormSettled); len(got) != 3 || !strings.Contains(content.JoinText(got[2].Content), "conv-1 saw 3 prompts") {
			t.Errorf("notices in the new process %v", got)
		}
		prod.mu.Lock()
		defer prod.mu.Unlock()
		if prod.processes != 3 || prod.live != 0 {
			t.Errorf("%d runs started, %d left", prod.processes, prod.live)
		}
	})
}

// 5 (issue): a product that cannot continue its conversations refuses a
// follow-up to a settled child with NOT_RESUMABLE saying so; nothing hangs
// and nothing is left resident. An interrupt of a remote child cancels its
// run; a queued message waits parked and runs at the next follow-up.
func TestRemoteChildRefusalsAndInterrupt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, t.TempDir(), nil)
		once := newProduct("once", false)
		again := newProduct("again", true)
		for _, p := range []*product{once, again} {
			if _, err := w.svc.Register(p); err != nil {
				t.Fatal(err)
			}
		}
		parent := w.newParent("")
		acc := w.start(parent, "once", "only", subagent.ContinuableOptions{})
		w.settled(1)
		_, err := w.svc.Followup(context.Background(), parent, acc.ChildID, []content.Block{content.Text("more")})
		if !errors.Is(err, subagent.ErrNotResumable) || !strings.Contains(err.Error(), "keeps no conversations") {
			t.Fatalf("follow-up to a product that cannot continue: %v", err)
		}
		if w.svc.Residency(acc.ChildID) != subagent.NotResident {
			t.Error("a refused resume left the child resident")
		}

		hung := w.start(parent, "again", "hang", subagent.ContinuableOptions{})
		<-again.hang
		w.followup(parent, hung.ChildID, "queued")
		if err := w.svc.Interrupt(parent, hung.ChildID); err != nil {
			t.Fatal(err)
		}
		onceBlocked(t, "the interrupted run parked", func() bool { return w.svc.Residency(hung.ChildID) == subagent.ResidentIdle })
		w.followup(parent, hung.ChildID, "wake")
		ends := w.settled(2)
		w.idle(parent)
		if ends[1].StopReason != subagent.Completed {
			t.Errorf("end %+v", ends[1])
		}
		again.mu.Lock()
		prompts := again.convs["conv-1"]
		live := again.live
		again.mu.Unlock()
		if strings.Join(prompts, ",") != "hang,queued,wake" || live != 0 {
			t.Errorf("prompts %q, %d runs left", prompts, live)
		}
	})
}
