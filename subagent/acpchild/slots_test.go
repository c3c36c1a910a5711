package acpchild_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/acpmeta"
	"github.com/dsh-go/dsh/subagent"
	"github.com/dsh-go/dsh/subagent/acpchild"
	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// hoarder is a fake dsh child that asks its parent for places under the
// tree's live-children cap (acpmeta.MethodAdmit): three, then gives one back
// and asks again, and says what it got. In mode "hoard-crash" it then dies
// holding its places.
type hoarder struct {
	stubborn
	conn  *acpsdk.AgentSideConnection
	crash bool
	meta  acpmeta.Session
}

func (h *hoarder) NewSession(_ context.Context, p acpsdk.NewSessionRequest) (acpsdk.NewSessionResponse, error) {
	acpmeta.Get(p.Meta, &h.meta)
	return acpsdk.NewSessionResponse{SessionId: "s"}, nil
}

func (h *hoarder) Prompt(ctx context.Context, p acpsdk.PromptRequest) (acpsdk.PromptResponse, error) {
	var got []string
	var slots []string
	admit := func() {
		raw, err := h.conn.CallExtension(ctx, acpmeta.MethodAdmit, acpmeta.Admit{SessionID: "s"})
		var ans acpmeta.Admitted
		switch {
		case err != nil:
			got = append(got, "error")
		case json.Unmarshal(raw, &ans) != nil:
			got = append(got, "garbled")
		case ans.Refused != "":
			got = append(got, "refused")
		default:
			got, slots = append(got, "granted"), append(slots, ans.Slot)
		}
	}
	for range 3 {
		admit()
	}
	if len(slots) > 0 {
		h.conn.NotifyExtension(ctx, acpmeta.MethodRelease, acpmeta.Release{SessionID: "s", Slot: slots[0]})
		time.Sleep(100 * time.Millisecond) // a notification is not answered
	}
	admit()
	if h.crash {
		os.Exit(1)
	}
	report := strings.Join(got, " ")
	if !h.meta.Admits {
		report = "no admits in _meta"
	}
	h.conn.SessionUpdate(ctx, acpsdk.SessionNotification{SessionId: p.SessionId, Update: acpsdk.UpdateAgentMessageText(report)})
	return acpsdk.PromptResponse{StopReason: acpsdk.StopReasonEndTurn}, nil
}

// hoard serves a hoarder on stdio.
func hoard(crash bool) {
	h := &hoarder{crash: crash}
	h.conn = acpsdk.NewAgentSideConnection(h, os.Stdout, os.Stdin)
	h.conn.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	select {}
}

// admitted counts how many more children svc admits in parent's tree, up
// to cap, and gives their places back.
func admitted(t *testing.T, svc *subagent.Service, req subagent.StartRequest, limit int) int {
	t.Helper()
	var adms []*subagent.Admission
	defer func() {
		for _, a := range adms {
			a.Release()
		}
	}()
	for range limit + 1 {
		a, err := svc.Admit("hoarder", req)
		if err != nil {
			break
		}
		adms = append(adms, a)
	}
	return len(adms)
}

// A dsh child's starts count against its parent tree's live-children cap:
// it gets places while the tree has room, is refused past the cap, can give
// a place back, and every place it holds comes back when its process is
// disposed or dies.
func TestChildPlacesCountAgainstTheTreeCap(t *testing.T) {
	for _, mode := range []string{"hoard", "hoard-crash"} {
		t.Run(mode, func(t *testing.T) {
			svc := subagent.NewService(nil, nil)
			svc.LimitLiveChildren(3)
			if _, err := svc.Register(newProvider(t, withName(fakeConfig(mode), "hoarder"))); err != nil {
				t.Fatal(err)
			}
			req := subagent.StartRequest{Prompt: subagenttest.Prompt("x"), Parent: subagenttest.ParentAgent(t)}
			run, err := svc.Start(context.Background(), "hoarder", req)
			if err != nil {
				t.Fatal(err)
			}
			res := subagenttest.Wait(t, run)
			if mode == "hoard" {
				// The child itself holds one of the 3 places: it gets two,
				// is refused the third, and gets it once it gave one back.
				if got := content.JoinText(res.Output); got != "granted granted refused granted" {
					t.Fatalf("the child got %q (result %+v)", got, res)
				}
				// The run's own place is given back once it has settled,
				// which may follow Wait by a moment.
				var n int
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					if n = admitted(t, svc, req, 3); n >= 1 || time.Now().After(deadline) {
						break
					}
				}
				if n != 1 {
					t.Fatalf("with the child's process holding two places, %d more were admitted, want 1", n)
				}
			}
			if err := run.Dispose(context.Background()); err != nil && mode == "hoard" {
				t.Fatal(err)
			}
			var n int
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if n = admitted(t, svc, req, 3); n == 3 || time.Now().After(deadline) {
					break
				}
			}
			if n != 3 {
				t.Fatalf("after the child's process ended, %d children were admitted, want 3: its places leaked", n)
			}
		})
	}
}

// withName names cfg's provider.
func withName(cfg acpchild.Config, name string) acpchild.Config {
	cfg.Name = name
	return cfg
}
