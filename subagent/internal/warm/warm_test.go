package warm

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fake is a process that runs until stopped.
type fake struct {
	done    chan struct{}
	once    sync.Once
	stopped atomic.Bool
}

func newFake() *fake { return &fake{done: make(chan struct{})} }

func (f *fake) Done() <-chan struct{} { return f.done }
func (f *fake) Stop() error {
	f.stopped.Store(true)
	f.exit()
	return nil
}
func (f *fake) exit() { f.once.Do(func() { close(f.done) }) }

func newPool(t *testing.T, cfg Config) *Pool[*fake] {
	t.Helper()
	p, err := New[*fake](cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func starter(n *atomic.Int32) func(context.Context) (*fake, error) {
	return func(context.Context) (*fake, error) {
		n.Add(1)
		return newFake(), nil
	}
}

func TestBadConfig(t *testing.T) {
	for _, c := range []Config{{}, {Size: 1}, {Size: 1, Sessions: 1}, {Size: 1, Sessions: 1, IdleTimeout: time.Second, MaxChildren: -1}} {
		if _, err := New[*fake](c); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}

// Children wait for the one start of a process they share; one whose ctx
// ends stops waiting without failing the others, and a failed start fails
// every child that waited for it.
func TestSharedStart(t *testing.T) {
	p := newPool(t, Config{Size: 1, Sessions: 4, IdleTimeout: time.Minute})
	release := make(chan struct{})
	var starts atomic.Int32
	start := func(context.Context) (*fake, error) {
		starts.Add(1)
		<-release
		return newFake(), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 3)
	for i := range 3 {
		c := context.Background()
		if i == 0 {
			c = ctx
		}
		go func() {
			l, err := p.Acquire(c, "k", start)
			if err == nil {
				defer l.Release(false)
			}
			errs <- err
		}()
	}
	for {
		p.mu.Lock()
		n := 0
		if len(p.members) == 1 {
			n = p.members[0].live
		}
		p.mu.Unlock()
		if n == 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled wait: %v", err)
	}
	close(release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if starts.Load() != 1 {
		t.Fatalf("%d starts", starts.Load())
	}

	boom := errors.New("boom")
	q := newPool(t, Config{Size: 1, Sessions: 4, IdleTimeout: time.Minute})
	if _, err := q.Acquire(context.Background(), "k", func(context.Context) (*fake, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("a failed start: %v", err)
	}
	if held, _ := q.Stats(); held != 0 {
		t.Fatalf("a failed start is held")
	}
}

// A full pool stops its least recently used idle process of another key
// to make room, and gives a child a process of its own when none is idle.
func TestEvictionAndOverflow(t *testing.T) {
	p := newPool(t, Config{Size: 2, Sessions: 1, IdleTimeout: time.Minute})
	var n atomic.Int32
	a, _ := p.Acquire(context.Background(), "a", starter(&n))
	b, _ := p.Acquire(context.Background(), "b", starter(&n))
	a.Release(false)
	b.Release(false)
	c, _ := p.Acquire(context.Background(), "c", starter(&n))
	deadline := time.Now().Add(5 * time.Second)
	for !a.Process.stopped.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !a.Process.stopped.Load() || b.Process.stopped.Load() {
		t.Fatalf("evicted a: %v, b: %v; want a only", a.Process.stopped.Load(), b.Process.stopped.Load())
	}
	b2, _ := p.Acquire(context.Background(), "b", starter(&n))
	if b2.Process != b.Process || !b2.Pooled {
		t.Fatal("b was not reused")
	}
	alone, err := p.Acquire(context.Background(), "b", starter(&n))
	if err != nil || alone.Pooled {
		t.Fatalf("a child of a full pool: %+v, %v", alone, err)
	}
	alone.Release(false)
	if !alone.Process.stopped.Load() {
		t.Fatal("a process of its own outlived its child")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Acquire(ctx, "b", func(ctx context.Context) (*fake, error) { return nil, ctx.Err() }); !errors.Is(err, context.Canceled) {
		t.Fatalf("the start of a process of its own ignored the child's ctx: %v", err)
	}
	b2.Release(false)
	c.Release(false)
}

// A broken child retires its process: it serves no one else and is
// stopped when its last child ends; an exit removes it at once.
func TestRetirementAndExit(t *testing.T) {
	p := newPool(t, Config{Size: 1, Sessions: 2, IdleTimeout: time.Minute})
	var n atomic.Int32
	x, _ := p.Acquire(context.Background(), "k", starter(&n))
	y, _ := p.Acquire(context.Background(), "k", starter(&n))
	x.Release(true)
	if x.Process.stopped.Load() {
		t.Fatal("stopped with a child left")
	}
	z, _ := p.Acquire(context.Background(), "k", starter(&n))
	if !z.Pooled || z.Process == x.Process {
		t.Fatal("a retired process took a child")
	}
	y.Release(false)
	if !x.Process.stopped.Load() {
		t.Fatal("a retired process outlived its last child")
	}
	z.Process.exit()
	deadline := time.Now().Add(5 * time.Second)
	for held, _ := p.Stats(); held != 0 && time.Now().Before(deadline); held, _ = p.Stats() {
		time.Sleep(time.Millisecond)
	}
	if held, _ := p.Stats(); held != 0 {
		t.Fatal("an exited process is held")
	}
	z.Release(false)
}

// Close stops every process and refuses new children.
func TestClose(t *testing.T) {
	p := newPool(t, Config{Size: 1, Sessions: 2, IdleTimeout: time.Minute})
	var n atomic.Int32
	x, _ := p.Acquire(context.Background(), "k", starter(&n))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if !x.Process.stopped.Load() {
		t.Fatal("Close left a process")
	}
	x.Release(false)
	if _, err := p.Acquire(context.Background(), "k", starter(&n)); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
