//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/session"
	"github.com/dsh-go/dsh/session/jsonl"
)

// The ways the parent delegates in the crash test.
var crashScenarios = []struct{ name, tool, extra string }{
	{"foreground", "subagent", ""},
	{"background", "subagent", `,"run_in_background":true`},
	{"acp-self", "subagent_isolated", ""},
}

// crashTally counts what the crash test's iterations left on disk.
type crashTally struct {
	killed, completed, children, unknown, interrupted int
}

// SIGKILL a real `dsh run` at random points of a foreground spawn, a
// background spawn and a `command: self` ACP delegation, in which parent
// and child each run a bash command that leaves a marker file. After each
// kill: every session file loads (and a writer's repair of it agrees with
// the reader's), the user prompt is on disk, every command that ran is in
// a log (outcome unknown when its result is not), no child session is
// stored without its parent, and no process is left.
func TestCrashConsistency(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("DSH_CRASH_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (DSH_CRASH_SEED=%d reruns these kill points)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	// Orphans (an ACP child, a bash command) are re-parented to this
	// process, so that the test can see them and check that none is left.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, 36 /* PR_SET_CHILD_SUBREAPER */, 1, 0); errno != 0 {
		t.Fatalf("prctl: %v", errno)
	}
	var tally crashTally
	const iterations = 54
	for i := range iterations {
		sc := crashScenarios[i%len(crashScenarios)]
		killAt, delay := 1+rng.IntN(26), time.Duration(rng.IntN(60))*time.Millisecond
		t.Run(fmt.Sprintf("%02d-%s-at-%d+%s", i, sc.name, killAt, delay), func(t *testing.T) {
			crashOnce(t, i, sc.tool, sc.extra, killAt, delay, &tally)
		})
		if t.Failed() {
			break
		}
	}
	t.Logf("%d runs killed, %d completed; %d child sessions, %d calls with outcome unknown, %d turns interrupted",
		tally.killed, tally.completed, tally.children, tally.unknown, tally.interrupted)
}

func crashOnce(t *testing.T, iter int, tool, extra string, killAt int, delay time.Duration, tally *crashTally) {
	home, marks := t.TempDir(), t.TempDir()
	prompt := fmt.Sprintf("crash test %d", iter)
	bash := func(tag string) string {
		return fmt.Sprintf(`{"command":"touch %s; sleep 0.05"}`, filepath.Join(marks, tag))
	}
	var mu sync.Mutex
	var cmd *exec.Cmd
	events, killed := 0, false
	tick := func() {
		mu.Lock()
		defer mu.Unlock()
		if events++; events == killAt {
			killed = true
			time.AfterFunc(delay, func() { cmd.Process.Kill() })
		}
	}
	srv := chatServer(t, func(r chatRequest) chatReply {
		switch {
		case strings.Contains(r.First, "child task"):
			if len(r.ToolResults) == 0 {
				return chatReply{Deltas: []string{"Child ", "working."}, Tool: "bash", Args: bash("child")}
			}
			return chatReply{Deltas: []string{"child ", "done"}}
		case r.LastRole == "user" && strings.HasPrefix(r.Last, "background task"):
			return chatReply{Deltas: []string{"got ", "it"}}
		case len(r.ToolResults) == 0:
			return chatReply{Deltas: []string{"Let me ", "start."}, Tool: "bash", Args: bash("parent")}
		case len(r.ToolResults) == 1:
			return chatReply{Deltas: []string{"Delegating."}, Tool: tool,
				Args: fmt.Sprintf(`{"description":"crash child","prompt":"child task %d"%s}`, iter, extra)}
		}
		return chatReply{Deltas: []string{"All ", "done."}}
	}, tick)
	mu.Lock()
	cmd = dshCommand(t, srv, home, crashConfig, "run", "--cwd", t.TempDir(), prompt)
	stderr := new(lines)
	cmd.Stderr = stderr
	err := cmd.Start()
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	watchdog := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	err = cmd.Wait()
	watchdog.Stop()
	mu.Lock()
	wasKilled := killed && err != nil
	mu.Unlock()
	if wasKilled {
		tally.killed++
	} else if err != nil {
		t.Fatalf("dsh run failed without being killed: %v\n%s", err, stderr.String())
	} else {
		tally.completed++
	}
	noneLeft(t)

	stored := settledSessions(t, home)
	promptStored := false
	for id, s := range stored {
		promptStored = promptStored || slices.Contains(userTexts(s.raw), prompt)
		if p := s.header.ParentSession; p != "" {
			tally.children++
			if _, ok := stored[p]; !ok {
				t.Errorf("child session %s is stored without its parent %s", id, p)
			}
		}
		if end, ok := lastTurnEnd(s.repaired); ok && end.Reason.Kind == session.EndInterrupted {
			tally.interrupted++
		}
	}
	if !promptStored {
		t.Errorf("the user prompt is not on disk (%d sessions stored)", len(stored))
	}
	ran, _ := os.ReadDir(marks)
	for _, m := range ran {
		unknown, ok := callOutcome(stored, filepath.Join(marks, m.Name()))
		if !ok {
			t.Errorf("the %s command ran, but no stored session records its call", m.Name())
		}
		if unknown {
			tally.unknown++
		}
	}
	// A writer's repair (Load) agrees with what readers saw.
	backend := jsonl.New(filepath.Join(home, "sessions"))
	for id, s := range stored {
		loaded, detach, err := session.NewStore(backend, nil).Load(context.Background(), id)
		if err != nil {
			t.Errorf("session %s: %v", id, err)
			continue
		}
		if err := session.CheckBalanced(loaded.Events()); err != nil || len(loaded.Events()) != len(s.repaired) {
			t.Errorf("session %s: Load gives %d events (%v), Read %d", id, len(loaded.Events()), err, len(s.repaired))
		}
		detach()
	}
	if t.Failed() {
		t.Logf("dsh stderr:\n%s", stderr.String())
	}
}

// callOutcome finds the tool/call whose arguments name marker and checks
// that its result is stored, or else that a reader's repair answers it as
// outcome unknown (reported by unknown).
func callOutcome(stored map[string]storedSession, marker string) (unknown, found bool) {
	for _, s := range stored {
		for _, e := range s.raw {
			call, ok := e.Data.(session.ToolCall)
			if !ok || !strings.Contains(call.Arguments, marker) {
				continue
			}
			for _, r := range s.repaired[e.Seq+1:] {
				res, ok := r.Data.(session.ToolResult)
				if !ok || res.Message.Source.CallID != call.CallID {
					continue
				}
				if r.Seq >= int64(len(s.raw)) { // added by the repair
					return true, res.Error != nil && res.Error.Code == "TOOL_OUTCOME_UNKNOWN"
				}
				return false, true
			}
		}
	}
	return false, false
}

// noneLeft waits for every process the run left (re-parented to this
// process) to end, reaping them, and fails the test, killing them, if any
// is still running after 30 s.
// settledSessions reads the stored sessions once no writer holds any of
// them. A killed process's lock outlives it by the moment its last thread
// takes to exit (its leader is a zombie, which noneLeft no longer counts,
// while another thread still closes its files).
func settledSessions(t *testing.T, home string) map[string]storedSession {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		stored := storedSessions(t, home)
		var live []string
		for id, s := range stored {
			if s.live {
				live = append(live, id)
			}
		}
		if len(live) == 0 {
			return stored
		}
		if time.Now().After(deadline) {
			t.Errorf("sessions %v are still held by a writer after every process is gone", live)
			return stored
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func noneLeft(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || errors.Is(err, syscall.ECHILD) {
				break
			}
		}
		left := proc.Children(os.Getpid())
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes left: %v", left)
			for _, p := range left {
				if pid, err := strconv.Atoi(strings.Fields(p)[0]); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
