package acpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/acpserver"
	"github.com/dsh-go/dsh/internal/acpmeta"
	"github.com/dsh-go/dsh/llm/scripted"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// admitter is a dsh parent's client: it grants room places under its
// tree's cap (acpmeta.MethodAdmit), then refuses, and records releases.
type admitter struct {
	*recorder
	mu       sync.Mutex
	room     int
	granted  int
	released []string
}

func (a *admitter) HandleExtensionMethod(_ context.Context, method string, params json.RawMessage) (any, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch method {
	case acpmeta.MethodAdmit:
		if a.granted >= a.room {
			return acpmeta.Admitted{Refused: "the parent's tree is full"}, nil
		}
		a.granted++
		return acpmeta.Admitted{Slot: strconv.Itoa(a.granted)}, nil
	case acpmeta.MethodRelease:
		var r acpmeta.Release
		json.Unmarshal(params, &r)
		a.released = append(a.released, r.SessionID+"/"+r.Slot)
		return nil, nil
	}
	return nil, acpsdk.NewMethodNotFound(method)
}

// admitSession opens a session with meta on a server whose children svc
// starts (cap 5), and admits children of its agent until one is refused.
func admitSession(t *testing.T, client acpsdk.Client, meta *acpmeta.Session) (acpsdk.SessionId, []*subagent.Admission, error) {
	t.Helper()
	svc := subagent.NewService(nil, nil)
	svc.LimitLiveChildren(5)
	if _, err := svc.Register(&subagenttest.Provider{ProviderName: "p"}); err != nil {
		t.Fatal(err)
	}
	conn, srv := connect(t, acpserver.Options{Subagents: svc}, scripted.New(), client)
	req := acpsdk.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acpsdk.McpServer{}}
	if meta != nil {
		req.Meta = acpmeta.Set(nil, *meta)
	}
	resp, err := conn.NewSession(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := srv.rt.Agents.Get(string(resp.SessionId))
	var adms []*subagent.Admission
	t.Cleanup(func() {
		for _, adm := range adms {
			adm.Release()
		}
	})
	for range 6 {
		adm, err := svc.Admit("p", subagent.StartRequest{Prompt: subagenttest.Prompt("x"), Parent: a})
		if err != nil {
			return resp.SessionId, adms, err
		}
		adms = append(adms, adm)
	}
	return resp.SessionId, adms, nil
}

// A session whose dsh parent admits takes each child's place from it: the
// parent's refusal is LIMIT_REACHED with its message, and a child's end
// gives its place back to the parent.
func TestSessionAsksItsParentForPlaces(t *testing.T) {
	client := &admitter{recorder: &recorder{}, room: 2}
	id, adms, err := admitSession(t, client, &acpmeta.Session{ParentSession: "parent-1", Depth: 1, Admits: true, MaxLiveChildren: 5})
	if len(adms) != 2 || !errors.Is(err, subagent.ErrLimitReached) || !strings.Contains(err.Error(), "the parent's tree is full") {
		t.Fatalf("admitted %d, then %v; want 2, then the parent's refusal", len(adms), err)
	}
	adms[0].Release()
	want := string(id) + "/1"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		client.mu.Lock()
		released := strings.Join(client.released, ",")
		client.mu.Unlock()
		if released == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the parent was given back %q, want %q", released, want)
		}
	}
}

// A session whose parent says it admits but does not answer (an older
// dsh) holds its children to its own cap, narrowed by the parent's; a
// session without a dsh parent only to its own.
func TestSessionFallsBackToItsOwnCap(t *testing.T) {
	_, adms, err := admitSession(t, &recorder{}, &acpmeta.Session{ParentSession: "parent-1", Depth: 1, Admits: true, MaxLiveChildren: 2})
	if len(adms) != 2 || !errors.Is(err, subagent.ErrLimitReached) {
		t.Errorf("with a parent that does not answer: admitted %d, then %v; want 2 (its cap), then LIMIT_REACHED", len(adms), err)
	}
	_, adms, err = admitSession(t, &admitter{recorder: &recorder{}}, nil)
	if len(adms) != 5 || !errors.Is(err, subagent.ErrLimitReached) {
		t.Errorf("without a dsh parent: admitted %d, then %v; want 5 (the server's cap), then LIMIT_REACHED", len(adms), err)
	}
}
