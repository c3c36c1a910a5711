package mcpserver_test

import (
	"cmp"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-go/dsh"
	"github.com/dsh-go/dsh/event"
	"github.com/dsh-go/dsh/permission"
	"github.com/dsh-go/dsh/subagent"
)

// askingUser is the user of an MCP client, answering dsh's asks
// (elicitations) with action and, when accepting, decision.
type askingUser struct {
	action, decision string

	mu       sync.Mutex
	messages []string
}

func (u *askingUser) asked() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.messages...)
}

// askBeforeRead makes the policy ask before read.
func askBeforeRead(su *setup) {
	p, err := permission.New(permission.Rules{Tools: map[string]permission.Decision{"read": permission.Ask}})
	if err != nil {
		panic(err)
	}
	su.server.Policy = p
}

// client gives the client an elicitation handler answering as u does.
func (u *askingUser) client(su *setup) {
	su.client.ElicitationHandler = func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		u.mu.Lock()
		u.messages = append(u.messages, r.Params.Message)
		u.mu.Unlock()
		res := &mcp.ElicitResult{Action: u.action}
		if u.action == "accept" {
			res.Content = map[string]any{"decision": u.decision}
		}
		return res, nil
	}
}

// protocol makes the client speak version v.
func protocol(v string) func(*setup) { return func(su *setup) { su.session.ProtocolVersion = v } }

// reads follows the children's read results: whether each ran.
func reads(t *testing.T, rt *dsh.Runtime) func() []bool {
	var mu sync.Mutex
	var ran []bool
	t.Cleanup(event.On(rt.Events, func(e subagent.ProgressEvent) {
		if e.Progress.Kind == subagent.ProgressToolResult {
			mu.Lock()
			ran = append(ran, !e.Progress.IsError)
			mu.Unlock()
		}
	}))
	return func() []bool {
		mu.Lock()
		defer mu.Unlock()
		return append([]bool(nil), ran...)
	}
}

// lookResult runs one delegation whose child calls read.
func lookResult(t *testing.T, cs *mcp.ClientSession, background bool) *mcp.CallToolResult {
	t.Helper()
	args := `{"description":"peek","prompt":"look"}`
	if background {
		args = `{"description":"peek","prompt":"look","run_in_background":true}`
	}
	res, err := callDelegate(context.Background(), cs, args, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// An ask reaches the client's user as a form naming the asking child and
// the call, on the current protocol (in rounds of the call: SEP-2322) and
// on an older one (a request during the call); the answer decides whether
// the call runs.
func TestAsksGoToTheClientsUser(t *testing.T) {
	for _, version := range []string{"", "2025-11-25"} {
		for _, tc := range []struct {
			name             string
			action, decision string
			ran              bool // whether the reads ran
			asks             int  // of two delegations
		}{
			{"allow asks each time", "accept", "allow", true, 2},
			{"allow-always asks once", "accept", "allow-always", true, 1},
			{"reject", "accept", "reject", false, 2},
			{"decline", "decline", "", false, 2},
			{"dismissed", "cancel", "", false, 2},
			{"an answer off the form", "accept", "maybe", false, 2},
		} {
			if version == "" && tc.decision == "maybe" {
				continue // the SDK's client refuses to send it (TestAskRoundsAgainstAHostileClient does)
			}
			t.Run(cmp.Or(version, "current")+"/"+tc.name, func(t *testing.T) {
				u := &askingUser{action: tc.action, decision: tc.decision}
				cs, rt := serve(t, nil, askBeforeRead, u.client, protocol(version))
				ran := reads(t, rt)
				for range 2 {
					if res := lookResult(t, cs, false); res.IsError || textOf(res) != "child: look" {
						t.Fatalf("delegation %+v", res)
					}
				}
				if got := ran(); len(got) != 2 || got[0] != tc.ran || got[1] != tc.ran {
					t.Errorf("reads ran %v, want %v twice", got, tc.ran)
				}
				asked := u.asked()
				if len(asked) != tc.asks {
					t.Fatalf("%d asks, want %d: %q", len(asked), tc.asks, asked)
				}
				for _, m := range asked {
					if m != "dsh: spawn · peek wants to run read with {}. Allow it?" {
						t.Errorf("ask %q", m)
					}
				}
				if n := len(rt.Agents.List()); n != 1 {
					t.Errorf("%d agents after the calls, want the session's own", n)
				}
			})
		}
	}
}

// A client that cannot show forms is never asked: the call is refused,
// saying how to approve asks. So is a background child's call on the
// current protocol, where only a call in progress can carry an ask; on an
// older one the client is asked at once.
func TestAsksThatCannotReachTheUser(t *testing.T) {
	t.Run("no forms", func(t *testing.T) {
		cs, rt := serve(t, nil, askBeforeRead)
		ran := reads(t, rt)
		lookResult(t, cs, false)
		if got := ran(); len(got) != 1 || got[0] {
			t.Fatalf("reads ran %v, want refused", got)
		}
	})
	for _, tc := range []struct {
		version string
		asked   bool
	}{{"", false}, {"2025-11-25", true}} {
		t.Run("background on "+cmp.Or(tc.version, "current"), func(t *testing.T) {
			u := &askingUser{action: "accept", decision: "allow"}
			cs, rt := serve(t, nil, askBeforeRead, u.client, protocol(tc.version))
			ran := reads(t, rt)
			ended := make(chan struct{}, 1)
			defer event.On(rt.Events, func(subagent.Ended) { ended <- struct{}{} })()
			if res := lookResult(t, cs, true); res.IsError || !strings.HasPrefix(textOf(res), "started background subagent task") {
				t.Fatalf("start %+v", res)
			}
			<-ended
			if got := ran(); len(got) != 1 || got[0] != tc.asked || (len(u.asked()) == 1) != tc.asked {
				t.Fatalf("reads ran %v after %d asks; want asked and run: %v", got, len(u.asked()), tc.asked)
			}
		})
	}
}

// A hostile or absent client cannot steer or strand a call: a forged or
// replayed request state is refused, and a call whose ask is never
// answered is aborted after AskTimeout, leaving no child.
func TestAskRoundsAgainstAHostileClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := &askingUser{action: "accept", decision: "allow"}
		cs, rt := serve(t, nil, askBeforeRead, u.client, func(su *setup) {
			su.client.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true} // the test plays the client's rounds
		})
		call := func(p *mcp.CallToolParams) *mcp.CallToolResult {
			t.Helper()
			res, err := cs.CallTool(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		args := json.RawMessage(`{"description":"peek","prompt":"look"}`)
		first := call(&mcp.CallToolParams{Name: "delegate", Arguments: args})
		if !first.NeedsInput() || first.RequestState == "" || len(first.InputRequests) != 1 {
			t.Fatalf("first round %+v: want one ask", first)
		}
		for _, state := range []string{"forged", first.RequestState + "x"} {
			res := call(&mcp.CallToolParams{Name: "delegate", Arguments: args, RequestState: state,
				InputResponses: mcp.InputResponseMap{"permission": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow"}}}})
			if !res.IsError || !strings.Contains(textOf(res), "unknown or expired requestState") {
				t.Fatalf("state %q: %+v", state, res)
			}
		}
		// The client never answers: the call is aborted once AskTimeout
		// (10 minutes, on the bubble's clock) has passed.
		synctest.Wait()
		if n := len(rt.Agents.List()); n != 2 {
			t.Fatalf("%d agents while the ask waits, want the session's and its child", n)
		}
		ended := make(chan subagent.Ended, 1)
		defer event.On(rt.Events, func(e subagent.Ended) { ended <- e })()
		if e := <-ended; e.StopReason != subagent.Aborted {
			t.Fatalf("the stranded call's child ended %s, want aborted", e.StopReason)
		}
		synctest.Wait()
		if n := len(rt.Agents.List()); n != 1 {
			t.Fatalf("%d agents after the timeout, want the session's own", n)
		}
		res := call(&mcp.CallToolParams{Name: "delegate", Arguments: args, RequestState: first.RequestState,
			InputResponses: mcp.InputResponseMap{"permission": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow"}}}})
		if !res.IsError || !strings.Contains(textOf(res), "unknown or expired requestState") {
			t.Fatalf("a late answer: %+v", res)
		}
	})
}

// A client playing the rounds itself: an answer off the form refuses the
// call and the delegation goes on to its result; the state is then spent.
func TestAskRoundsPlayedByTheClient(t *testing.T) {
	cs, rt := serve(t, nil, askBeforeRead, (&askingUser{}).client, func(su *setup) {
		su.client.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	})
	ran := reads(t, rt)
	args := json.RawMessage(`{"description":"peek","prompt":"look"}`)
	first, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "delegate", Arguments: args})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("first round %+v, %v", first, err)
	}
	ask, ok := first.InputRequests["permission"].(*mcp.ElicitParams)
	if !ok || ask.Message != "dsh: spawn · peek wants to run read with {}. Allow it?" || ask.RequestedSchema == nil {
		t.Fatalf("input request %#v", first.InputRequests["permission"])
	}
	answer := &mcp.CallToolParams{Name: "delegate", Arguments: args, RequestState: first.RequestState,
		InputResponses: mcp.InputResponseMap{"permission": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "maybe"}}}}
	last, err := cs.CallTool(context.Background(), answer)
	if err != nil || last.NeedsInput() || last.IsError || textOf(last) != "child: look" {
		t.Fatalf("last round %+v, %v", last, err)
	}
	if got := ran(); len(got) != 1 || got[0] {
		t.Fatalf("reads ran %v, want refused", got)
	}
	again, err := cs.CallTool(context.Background(), answer)
	if err != nil || !again.IsError || !strings.Contains(textOf(again), "unknown or expired requestState") {
		t.Fatalf("a replayed answer: %+v, %v", again, err)
	}
}

// A session that ends while a call waits for an ask's answer aborts the
// call: no agent, process or goroutine is left (serve's cleanup and
// TestMain check).
func TestAskRoundsEndWithTheSession(t *testing.T) {
	cs, _ := serve(t, nil, askBeforeRead, (&askingUser{}).client, func(su *setup) {
		su.client.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	})
	first, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "delegate",
		Arguments: json.RawMessage(`{"description":"peek","prompt":"look"}`)})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("first round %+v, %v", first, err)
	}
}
