package replay_test

import (
	"context"
	"errors"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/llm"
	"github.com/dsh-go/dsh/llm/replay"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/prompt"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/subagent/inproc"
	"github.com/dsh-go/dsh/subagent/subagenttool"
	"github.com/dsh-go/dsh/task"
	"github.com/dsh-go/dsh/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// world is a runtime with spawn (tool subagent) and fork (tool
// subagent_fork) children and the task tools, whose model route "test" is
// served by model.
type world struct {
	rt    *dsh.Runtime
	store *session.MemoryBackend

	mu      sync.Mutex
	noticed map[string]bool // tasks whose completion notice was delivered
}

func newWorld(t *testing.T, model func(*world) llm.Model, extra ...tool.Definition) *world {
	t.Helper()
	w := &world{store: session.NewMemoryBackend(), noticed: map[string]bool{}}
	rt, err := dsh.New(dsh.Options{Backend: w.store})
	if err != nil {
		t.Fatal(err)
	}
	w.rt = rt
	t.Cleanup(func() { rt.Close(context.Background()) })
	must := func(_ func(), err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(rt.LLM.Register("test", model(w)))
	spawn, _ := inproc.NewSpawn(rt.Agents)
	fork, _ := inproc.NewFork(rt.Agents)
	must(rt.Subagents.Register(spawn))
	must(rt.Subagents.Register(fork))
	deps := subagenttool.Deps{Subagents: rt.Subagents, Tools: rt.Tools, Tasks: rt.Tasks, Events: rt.Events}
	must(subagenttool.Mount(deps, subagenttool.Config{Provider: "spawn"}))
	must(subagenttool.Mount(deps, subagenttool.Config{Provider: "fork", ToolName: "subagent_fork"}))
	must(task.Mount(rt.Tasks, rt.Tools, rt.Prompt, task.ToolOptions{}))
	// Listeners run in order: this one after the notice was delivered.
	event.On(rt.Events, func(e task.Done) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.noticed[e.Task.ID] = true
	})
	for _, d := range extra {
		must(rt.Tools.Register(d))
	}
	return w
}

// run runs prompts as turns of a new top-level agent working in cwd, waits
// until it and its background tasks have settled (each task's notice
// delivered, or not owed), and returns its id.
func (w *world) run(t *testing.T, cwd string, prompts ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := w.rt.Agents.Create(ctx, agent.CreateOptions{Cwd: cwd, Options: agent.Options{Provider: "test", Model: "m1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range prompts {
		if _, err := a.Run(ctx, content.UserText(p)); err != nil {
			t.Fatal(err)
		}
	}
	for {
		busy := false
		w.mu.Lock()
		for _, tk := range w.rt.Tasks.List(a) {
			busy = busy || !tk.Status.Terminal() || !tk.Reported && !w.noticed[tk.ID]
		}
		w.mu.Unlock()
		// The status last: a notice delivered before the check above has
		// woken the agent by now.
		busy = busy || a.Status() == agent.StatusRunning
		if !busy {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the run did not settle")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := w.rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return a.ID()
}

// recording reads the tree of session id from the world's store.
func (w *world) recording(t *testing.T, id string) *replay.Recording {
	t.Helper()
	rec, err := replay.FromStore(session.NewStore(w.store, nil), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// replayWorld is a world whose model replays rec.
func replayWorld(t *testing.T, rec *replay.Recording, opts replay.Options, extra ...tool.Definition) (*world, *replay.Model) {
	var m *replay.Model
	w := newWorld(t, func(w *world) llm.Model {
		opts.Live = w.rt.Sessions.Get
		m = replay.NewModel(rec, opts)
		return m
	}, extra...)
	t.Cleanup(m.Close)
	return w, m
}

// chunks plays a scripted entry.
func chunks(ctx context.Context, req *llm.Request, e scripted.Entry) iter.Seq[content.Chunk] {
	return scripted.New(e).Stream(ctx, req)
}

// childTask returns the task of an in-process child's request ("" for a
// top-level one) and the tool results the request holds.
func childTask(req *llm.Request) (string, []string) {
	var results []string
	child := ""
	for _, m := range req.Messages {
		for _, b := range m.Content {
			if b.Type == content.TypeToolResult {
				results = append(results, content.JoinText(b.Content))
			}
		}
		if _, t, ok := prompt.SplitChildTask(content.JoinText(m.Content)); ok && m.Role == content.RoleUser {
			child = t
		}
	}
	return child, results
}

// delegating is a model whose top-level agent delegates each of tasks to a
// spawn child (all in one step, so that they run in parallel), then sums
// up; a child answers "done: <task>".
func delegating(tasks ...string) func(*world) llm.Model {
	return func(*world) llm.Model {
		return llm.ModelFunc(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
			child, results := childTask(req)
			switch {
			case child != "":
				return chunks(ctx, req, scripted.Text("done: "+child))
			case len(results) == 0:
				var calls []scripted.Call
				for _, tk := range tasks {
					calls = append(calls, scripted.Call{ID: "call_" + tk, Name: "subagent",
						Arguments: `{"description":"` + tk + `","prompt":"` + tk + `"}`})
				}
				return chunks(ctx, req, scripted.ToolCalls("Delegating.", calls...))
			}
			return chunks(ctx, req, scripted.Text("All done: "+strings.Join(results, "; ")))
		})
	}
}

func TestReplayedTreeMatchesTheRecording(t *testing.T) {
	rec := newWorld(t, delegating("count to three"))
	cwd := t.TempDir()
	root := rec.run(t, cwd, "delegate the counting")
	recording := rec.recording(t, root)
	if n := len(recording.Sessions); n != 2 {
		t.Fatalf("%d sessions recorded, want the top-level one and its child", n)
	}

	// Another directory: the working directory is compared as {{cwd}}.
	w, m := replayWorld(t, recording, replay.Options{})
	live := w.run(t, t.TempDir(), "delegate the counting")
	if d := m.Divergences(); len(d) > 0 {
		t.Fatalf("divergences: %v", d)
	}
	if u := m.Unplayed(); len(u) > 0 {
		t.Fatalf("unplayed: %v", u)
	}
	if diffs := replay.Compare(recording, w.recording(t, live)); len(diffs) > 0 {
		t.Fatalf("the trees differ: %v", diffs)
	}
}

func TestChangedToolDescriptionDivergesWithADiff(t *testing.T) {
	probe := func(desc string) tool.Definition {
		return tool.Func("probe", desc, true, func(context.Context, tool.Call, struct{}) (tool.Result, error) {
			return tool.TextResult("ok"), nil
		})
	}
	rec := newWorld(t, delegating("count"), probe("Probe the workspace."))
	recording := rec.recording(t, rec.run(t, t.TempDir(), "go"))

	w, m := replayWorld(t, recording, replay.Options{}, probe("Probe the whole workspace."))
	ctx := context.Background()
	a, err := w.rt.Agents.Create(ctx, agent.CreateOptions{Cwd: t.TempDir(), Options: agent.Options{Provider: "test", Model: "m1"}})
	if err != nil {
		t.Fatal(err)
	}
	end, err := a.Run(ctx, content.UserText("go"))
	if err != nil {
		t.Fatal(err)
	}
	if end.Reason.Kind != session.EndError || end.Reason.Error.Code != replay.CodeDiverged {
		t.Fatalf("turn ended %+v, want an error %s", end.Reason, replay.CodeDiverged)
	}
	divs := m.Divergences()
	if len(divs) != 1 {
		t.Fatalf("divergences %v, want one", divs)
	}
	msg := divs[0].Error()
	for _, want := range []string{"session " + recording.Root().Header.ID[:8], "(top level)", "turn 1 step 1",
		`tool "probe": its description differs`, `recorded: "Probe the workspace."`, `live:     "Probe the whole workspace."`} {
		if !strings.Contains(msg, want) {
			t.Errorf("the divergence lacks %q:\n%s", want, msg)
		}
	}
	if divs[0].Session != recording.Root() {
		t.Errorf("the divergence names %v, want the root", divs[0].Session)
	}
}

func TestChangedToolResultNamesTheMessage(t *testing.T) {
	rec := newWorld(t, delegating("count"))
	recording := rec.recording(t, rec.run(t, t.TempDir(), "go"))
	// The child's recorded answer is edited: the parent's second request
	// then carries another tool result than the recorded one.
	child := recording.Sessions[1]
	for i, c := range child.Calls[0].Chunks {
		switch {
		case c.Type == content.ChunkTextDelta:
			child.Calls[0].Chunks[i].Text = strings.ToUpper(c.Text)
		case c.Block != nil:
			b := *c.Block
			b.Text = strings.ToUpper(b.Text)
			child.Calls[0].Chunks[i].Block = &b
		}
	}
	w, m := replayWorld(t, recording, replay.Options{})
	w.run(t, t.TempDir(), "go")
	divs := m.Divergences()
	if len(divs) == 0 {
		t.Fatal("no divergence")
	}
	msg := divs[0].Error()
	for _, want := range []string{recording.Root().Label(), "turn 1 step 2", "message 2 (the result of tool call call_count) differs", "recorded:", "done: count", "DONE: COUNT"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the divergence lacks %q:\n%s", want, msg)
		}
	}
}

func TestExtraRequestDiverges(t *testing.T) {
	rec := newWorld(t, delegating("count"))
	recording := rec.recording(t, rec.run(t, t.TempDir(), "go"))
	w, m := replayWorld(t, recording, replay.Options{})
	w.run(t, t.TempDir(), "go", "and again")
	divs := m.Divergences()
	if len(divs) != 1 || !strings.Contains(divs[0].Error(), "an extra model call: the recording has 2 calls for this session") {
		t.Fatalf("divergences %v, want one extra call", divs)
	}
}

func TestParallelChildrenFindTheirRecordings(t *testing.T) {
	tasks := []string{"alpha", "beta", "gamma", "delta"}
	rec := newWorld(t, delegating(tasks...))
	recording := rec.recording(t, rec.run(t, t.TempDir(), "fan out"))
	if n := len(recording.Root().Children); n != len(tasks) {
		t.Fatalf("%d children recorded", n)
	}
	for range 5 { // the children start in any order
		w, m := replayWorld(t, recording, replay.Options{})
		live := w.run(t, t.TempDir(), "fan out")
		if d := m.Divergences(); len(d) > 0 {
			t.Fatalf("divergences: %v", d)
		}
		if diffs := replay.Compare(recording, w.recording(t, live)); len(diffs) > 0 {
			t.Fatalf("the trees differ: %v", diffs)
		}
	}
}

// backgroundModel starts a background child, ends its turn, and reads the
// child's output when the completion notice wakes it. The child answers
// after delay: in a bubble, once the parent's turn is over, so that in the
// recording the notice opens a turn of its own.
func backgroundModel(delay time.Duration) func(*world) llm.Model {
	return func(*world) llm.Model {
		return llm.ModelFunc(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
			child, results := childTask(req)
			last := req.Messages[len(req.Messages)-1]
			switch {
			case child != "":
				time.Sleep(delay) // on the bubble's clock
				return chunks(ctx, req, scripted.Text("background result"))
			case last.Source.Plugin == task.NoticePlugin:
				return chunks(ctx, req, scripted.ToolCalls("", scripted.Call{ID: "call_read", Name: "task_output", Arguments: `{"task_id":"subagent-1"}`}))
			case len(results) == 0:
				return chunks(ctx, req, scripted.ToolCalls("", scripted.Call{ID: "call_bg", Name: "subagent",
					Arguments: `{"description":"bg","prompt":"work in the background","run_in_background":true}`}))
			case len(results) == 1:
				return chunks(ctx, req, scripted.Text("Started it; I will report back."))
			}
			return chunks(ctx, req, scripted.Text("The child reported: "+results[len(results)-1]))
		})
	}
}

// The notice's place in the parent's log depends on when the child ends;
// the replay keeps the recorded order whatever the scheduling.
func TestBackgroundNoticeKeepsItsRecordedPlace(t *testing.T) {
	var recording *replay.Recording
	synctest.Test(t, func(t *testing.T) {
		rec := newWorld(t, backgroundModel(time.Second))
		recording = rec.recording(t, rec.run(t, t.TempDir(), "start it"))
	})
	turns := 0
	for _, e := range recording.Root().Events {
		if e.Type == session.TypeTurnStart {
			turns++
		}
	}
	if turns != 2 {
		t.Fatalf("recorded %d turns of the parent, want the prompt's and the notice's", turns)
	}
	for range 5 {
		w, m := replayWorld(t, recording, replay.Options{})
		live := w.run(t, t.TempDir(), "start it")
		if d := m.Divergences(); len(d) > 0 {
			t.Fatalf("divergences: %v", d)
		}
		if diffs := replay.Compare(recording, w.recording(t, live)); len(diffs) > 0 {
			t.Fatalf("the trees differ: %v", diffs)
		}
	}
}

func TestCompareReportsTheFirstDifferingEvent(t *testing.T) {
	rec := newWorld(t, delegating("count"))
	root := rec.run(t, t.TempDir(), "go")
	recording := rec.recording(t, root)
	other := newWorld(t, delegating("tally"))
	live := other.recording(t, other.run(t, t.TempDir(), "go"))
	diffs := replay.Compare(recording, live)
	if len(diffs) != 2 {
		t.Fatalf("differences %v, want the root's and its child's", diffs)
	}
	root0 := diffs[0].String()
	for _, want := range []string{"(top level)", "event 9 differs at line 1", "count", "tally", `task "count"`} {
		if !strings.Contains(root0+diffs[1].String(), want) {
			t.Errorf("the report lacks %q:\n%s\n%s", want, root0, diffs[1])
		}
	}
}

func TestRecordingRoundTripsThroughADirectory(t *testing.T) {
	rec := newWorld(t, delegating("a", "b"))
	recording := rec.recording(t, rec.run(t, t.TempDir(), "go"))
	dir := t.TempDir()
	if err := recording.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Fatalf("%d files written, want 3", len(entries))
	}
	back, err := replay.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diffs := replay.Compare(recording, back); len(diffs) > 0 {
		t.Fatalf("the read-back recording differs: %v", diffs)
	}
	if back.Root().Header.ID != recording.Root().Header.ID || len(back.Root().Calls) != 2 {
		t.Fatalf("read back %+v", back.Root().Header)
	}
	// A torn last line (a crash while writing) is left out.
	path := filepath.Join(dir, "session.jsonl")
	data, _ := os.ReadFile(path)
	os.WriteFile(path, append(data, `{"type":"turn/st`...), 0o644)
	if _, err := replay.ReadDir(dir); err != nil {
		t.Fatalf("a torn last line: %v", err)
	}
	// Two trees are not one recording.
	os.WriteFile(filepath.Join(dir, "other.jsonl"), []byte(`{"type":"session","version":0,"id":"other","createdAt":1,"delegationDepth":0}`+"\n"), 0o644)
	var re *replay.Error
	if _, err := replay.ReadDir(dir); !errors.As(err, &re) || re.Code != replay.CodeRecording {
		t.Fatalf("two roots: %v", err)
	}
}

// A recording whose process stopped while the model answered ends that
// call with an error finish, not a hang.
func TestUnfinishedRecordedCallFails(t *testing.T) {
	rec := newWorld(t, delegating())
	recording := rec.recording(t, rec.run(t, t.TempDir(), "go"))
	root := recording.Root()
	last := &root.Calls[len(root.Calls)-1]
	last.Chunks, last.ChunkTimes, last.Finished = last.Chunks[:2], last.ChunkTimes[:2], false
	m := replay.NewModel(recording, replay.Options{})
	var got []content.Chunk
	for _, call := range root.Calls {
		req := &llm.Request{SessionID: "live", Provider: call.Request.Provider, Model: call.Request.Model,
			System: call.Request.System, Tools: call.Request.Tools, Messages: call.Request.Messages}
		got = got[:0]
		for c := range m.Stream(context.Background(), req) {
			got = append(got, c)
		}
	}
	fin := got[len(got)-1]
	if fin.Finish == nil || fin.Finish.Failure == nil || fin.Finish.Failure.Code != replay.CodeIncomplete {
		t.Fatalf("last chunk %+v, want a %s finish", fin.Finish.Failure, replay.CodeIncomplete)
	}
}

// With recorded timing a call waits as the recording did; a cancel ends
// the wait at once.
func TestRecordedTimingIsCancellable(t *testing.T) {
	rec := newWorld(t, delegating())
	recording := rec.recording(t, rec.run(t, t.TempDir(), "go"))
	root := recording.Root()
	call := root.Calls[0]
	for i := range root.Calls[0].ChunkTimes {
		root.Calls[0].ChunkTimes[i] = call.RequestTime + time.Hour.Milliseconds()
	}
	m := replay.NewModel(recording, replay.Options{Timing: replay.AsRecorded})
	ctx, cancel := context.WithCancel(context.Background())
	req := &llm.Request{SessionID: "live", Provider: call.Request.Provider, Model: call.Request.Model,
		System: call.Request.System, Tools: call.Request.Tools, Messages: call.Request.Messages}
	var wg sync.WaitGroup
	var got []content.Chunk
	wg.Go(func() {
		for c := range m.Stream(ctx, req) {
			got = append(got, c)
		}
	})
	cancel()
	wg.Wait()
	if len(got) != 1 || got[0].Finish == nil || got[0].Finish.Kind != content.FinishAborted {
		t.Fatalf("chunks %+v %+v, want one aborted finish", got, got[0].Finish.Failure)
	}
}

// Ids a re-run mints anew (a child's, a job's) are compared by the order
// they appear in, and the recorded answers pass the live ids back.
func TestFreshIdsAreMapped(t *testing.T) {
	tools := func() []tool.Definition {
		var mu sync.Mutex
		minted := map[string]bool{}
		type checkArgs struct {
			ID string `json:"id"`
		}
		return []tool.Definition{
			tool.Func("mint", "Start a job.", true, func(context.Context, tool.Call, struct{}) (tool.Result, error) {
				id := uuid.NewString()
				mu.Lock()
				minted[id] = true
				mu.Unlock()
				return tool.TextResult("started job " + id), nil
			}),
			tool.Func("check", "Check a job.", true, func(_ context.Context, _ tool.Call, a checkArgs) (tool.Result, error) {
				mu.Lock()
				defer mu.Unlock()
				if !minted[a.ID] {
					return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "unknown job %s", a.ID)
				}
				return tool.TextResult("job " + a.ID + " is running"), nil
			}),
		}
	}
	model := func(*world) llm.Model {
		return llm.ModelFunc(func(ctx context.Context, req *llm.Request) iter.Seq[content.Chunk] {
			_, results := childTask(req)
			switch len(results) {
			case 0:
				return chunks(ctx, req, scripted.ToolCalls("", scripted.Call{ID: "c1", Name: "mint", Arguments: `{}`}))
			case 1:
				id := strings.TrimPrefix(results[0], "started job ")
				return chunks(ctx, req, scripted.ToolCalls("Checking "+id, scripted.Call{ID: "c2", Name: "check", Arguments: `{"id":"` + id + `"}`}))
			}
			return chunks(ctx, req, scripted.Text(results[1]))
		})
	}
	rec := newWorld(t, model, tools()...)
	recording := rec.recording(t, rec.run(t, t.TempDir(), "go"))
	w, m := replayWorld(t, recording, replay.Options{}, tools()...)
	live := w.run(t, t.TempDir(), "go")
	if d := m.Divergences(); len(d) > 0 {
		t.Fatalf("divergences: %v", d)
	}
	if diffs := replay.Compare(recording, w.recording(t, live)); len(diffs) > 0 {
		t.Fatalf("the trees differ: %v", diffs)
	}
}

// With recorded timing each chunk comes as long after the previous one as
// it did in the recording (measured on the bubble's clock).
func TestRecordedTimingKeepsTheGaps(t *testing.T) {
	rec := newWorld(t, delegating())
	recording := rec.recording(t, rec.run(t, t.TempDir(), "go"))
	call := &recording.Root().Calls[0]
	for i := range call.ChunkTimes {
		call.ChunkTimes[i] = call.RequestTime + int64(40*(i+1))
	}
	synctest.Test(t, func(t *testing.T) {
		m := replay.NewModel(recording, replay.Options{Timing: replay.AsRecorded})
		req := &llm.Request{SessionID: "live", Provider: call.Request.Provider, Model: call.Request.Model,
			System: call.Request.System, Tools: call.Request.Tools, Messages: call.Request.Messages}
		start, i := time.Now(), 0
		for range m.Stream(context.Background(), req) {
			i++
			if got, want := time.Since(start), time.Duration(40*i)*time.Millisecond; got != want {
				t.Fatalf("chunk %d came after %v, want %v", i, got, want)
			}
		}
		if i != len(call.Chunks) {
			t.Fatalf("%d chunks, want %d", i, len(call.Chunks))
		}
	})
}
