package mcptool

import (
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
