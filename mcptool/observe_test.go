package mcptool

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The observer notes a tools/list_changed notification, and the tools a
// listing marks task-required, page by page; other messages change
// nothing.
func TestObserver(t *testing.T) {
	o := newObserver()
	id, _ := jsonrpc.MakeID(float64(1))
	o.message(&jsonrpc.Response{ID: id, Result: json.RawMessage(`{"tools":[{"name":"a","execution":{"taskSupport":"required"}},` +
		`{"name":"b","execution":{"taskSupport":"optional"}},{"name":"c"}]}`)})
	o.message(&jsonrpc.Response{ID: id, Result: json.RawMessage(`{"content":[{"type":"text","text":"\"taskSupport\""}]}`)})
	if !o.requiresTask("a") || o.requiresTask("b") || o.requiresTask("c") || o.stale.Load() {
		t.Errorf("after a listing: %v, stale %v", o.taskRequired, o.stale.Load())
	}
	o.message(&jsonrpc.Request{Method: "notifications/message"})
	o.message(&jsonrpc.Request{ID: id, Method: toolListChanged}) // a request, not a notification
	if o.stale.Load() {
		t.Error("stale without the notification")
	}
	o.message(&jsonrpc.Request{Method: toolListChanged})
	o.message(&jsonrpc.Response{ID: id, Result: json.RawMessage(`{"tools":[{"name":"a","execution":{"taskSupport":"forbidden"}}]}`)})
	if !o.stale.Load() || o.requiresTask("a") {
		t.Errorf("after the notification and a new listing: %v, stale %v", o.taskRequired, o.stale.Load())
	}
}

// FuzzObserver reads a server's raw results and notifications as the
// observer does: never a panic; tools are task-required only from a
// JSON listing that names taskSupport; stale only after the notification.
func FuzzObserver(f *testing.F) {
	f.Add([]byte(`{"tools":[{"name":"a","execution":{"taskSupport":"required"}}]}`), "")
	f.Add([]byte(`{"tools":[{"name":"a","execution":{"taskSupport":5}}],"nextCursor":"x"}`), toolListChanged)
	f.Add([]byte(`{"content":[{"type":"text","text":"taskSupport"}]}`), "notifications/message")
	f.Fuzz(func(t *testing.T, result []byte, method string) {
		o := newObserver()
		id, _ := jsonrpc.MakeID(float64(1))
		o.message(&jsonrpc.Response{ID: id, Result: json.RawMessage(result)})
		o.message(&jsonrpc.Request{Method: method, Params: json.RawMessage(result)})
		if o.stale.Load() != (method == toolListChanged) {
			t.Fatalf("stale %v after %q", o.stale.Load(), method)
		}
		if len(o.taskRequired) > 0 && (!json.Valid(result) || !bytes.Contains(result, []byte(`"taskSupport"`))) {
			t.Fatalf("task-required %v from %q", o.taskRequired, result)
		}
	})
}
