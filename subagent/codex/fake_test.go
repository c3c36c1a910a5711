package codex_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dsh-go/dsh/subagent/subagenttest"
)

// The fake app-server is this test binary re-executed with fakeEnv set. It
// speaks Codex 0.171's wire (no "jsonrpc" member, server request ids from 0)
// and picks its turn's script by the prompt text.
const (
	fakeEnv    = "CODEX_FAKE"     // the process mode: "scripted", "silent", "exit", "reject-thread", "deaf"
	fakeLogEnv = "CODEX_FAKE_LOG" // where it appends every line it receives
	fakeThread = "thread-fake"
	fakeTurn   = "turn-fake"
)

// Scenario prompts of the fake (the conformance prompts map to complete,
// hang and fail).
const (
	scComplete       = "scenario: complete"
	scNullPhase      = "scenario: null phase"
	scBlank          = "scenario: blank"
	scApprovals      = "scenario: approvals"
	scUnknownRequest = "scenario: unknown request"
	scContextWindow  = "scenario: context window"
	scFail           = "scenario: fail"
	scFailObject     = "scenario: fail object"
	scHang           = "scenario: hang"
	scIgnore         = "scenario: ignore interrupt"
	scCrash          = "scenario: crash"
	scHugeLine       = "scenario: huge line"
	scGarbage        = "scenario: garbage"
)

// Answers of the complete scenario.
const (
	completeAnswer = "The answer is 42."
	nullAnswer     = "plain answer without a phase"
	crashPartial   = "partial words"
	hugeLineBytes  = 2 << 20
)

type fake struct {
	in      chan map[string]json.RawMessage
	deaf    bool // stop reading stdin after thread/start
	nextReq int
}

func fakeServer(mode string) {
	if path := os.Getenv(fakeLogEnv); path != "" {
		home := os.Getenv("CODEX_HOME")
		_, statErr := os.Stat(home)
		cwd, _ := os.Getwd()
		logLine(map[string]any{"env": map[string]any{"CODEX_HOME": home, "homeExists": statErr == nil,
			"secret": os.Getenv("CODEX_TEST_SECRET_TOKEN"), "cwd": cwd}})
	}
	switch mode {
	case "silent": // never answers, ignores EOF and SIGTERM
		signal.Ignore(syscall.SIGTERM)
		select {}
	case "exit":
		fmt.Fprintln(os.Stderr, "error: cannot load config.toml")
		os.Exit(2)
	}
	f := &fake{in: make(chan map[string]json.RawMessage), deaf: mode == "deaf"}
	go f.read()
	for {
		m := f.recv()
		id := m["id"]
		switch method(m) {
		case "initialize":
			f.reply(id, map[string]any{"userAgent": "fake/0.171.0", "codexHome": os.Getenv("CODEX_HOME"),
				"platformFamily": "unix", "platformOs": "linux"})
			f.notify("configWarning", map[string]any{"summary": "fake warning", "details": nil})
		case "initialized":
		case "thread/start":
			if mode == "reject-thread" {
				f.send(map[string]any{"id": id, "error": map[string]any{"code": -32600, "message": "thread/start rejected by the fake"}})
				continue
			}
			var p struct {
				Model string `json:"model"`
			}
			json.Unmarshal(m["params"], &p)
			thread := map[string]any{"id": fakeThread, "ephemeral": true, "turns": []any{}}
			f.reply(id, map[string]any{"thread": thread, "model": or(p.Model, "fake-model"), "modelProvider": "fake"})
			f.notify("thread/started", map[string]any{"thread": thread})
		case "turn/start":
			var p struct {
				Input []struct {
					Text string `json:"text"`
				} `json:"input"`
			}
			json.Unmarshal(m["params"], &p)
			f.reply(id, map[string]any{"turn": turn("inProgress", nil, nil)})
			f.notify("turn/started", map[string]any{"threadId": fakeThread, "turn": turn("inProgress", nil, nil)})
			prompt := ""
			if len(p.Input) > 0 {
				prompt = p.Input[0].Text
			}
			f.script(prompt)
		case "turn/interrupt":
			f.reply(id, map[string]any{})
		default:
			if id != nil {
				f.send(map[string]any{"id": id, "error": map[string]any{"code": -32601, "message": "unknown method"}})
			}
		}
	}
}

// script plays the turn for prompt.
func (f *fake) script(prompt string) {
	switch prompt {
	case scComplete, subagenttest.PromptComplete:
		f.message("c1", "commentary", "Let me look around.")
		f.item("item/started", map[string]any{"type": "commandExecution", "id": "cmd-1", "command": "ls", "status": "inProgress"})
		f.item("item/completed", map[string]any{"type": "commandExecution", "id": "cmd-1", "command": "ls", "status": "completed", "exitCode": 0})
		f.message("m1", "final_answer", "The answer ", "is 42.")
		f.message("m2", nil, "not this one: a later message without a phase")
		f.message("c2", "commentary", "Done, wrapping up.")
		f.usage()
		f.complete("completed", nil)
	case scNullPhase:
		f.message("m1", nil, nullAnswer)
		f.message("c1", "commentary", "a later commentary that must not count")
		f.complete("completed", nil)
	case scBlank:
		f.message("c1", "commentary", "Thinking out loud.")
		f.message("m1", "final_answer", "  \n\t")
		f.complete("completed", nil)
	case scApprovals:
		var answers []string
		for _, req := range []struct {
			method string
			params map[string]any
		}{
			{"item/commandExecution/requestApproval", map[string]any{"itemId": "cmd-1", "command": "rm -rf build"}},
			{"item/fileChange/requestApproval", map[string]any{"itemId": "patch-1"}},
			{"item/permissions/requestApproval", map[string]any{"itemId": "perm-1", "cwd": "/", "permissions": map[string]any{"network": map[string]any{"enabled": true}}}},
			{"item/tool/requestUserInput", map[string]any{"itemId": "q-1", "questions": []any{}}},
			{"mcpServer/elicitation/request", map[string]any{"serverName": "srv", "message": "name?"}},
		} {
			req.params["threadId"], req.params["turnId"], req.params["startedAtMs"] = fakeThread, fakeTurn, 1
			answers = append(answers, string(f.request(req.method, req.params)))
		}
		f.message("m1", "final_answer", strings.Join(answers, "\n"))
		f.complete("completed", nil)
	case scUnknownRequest:
		f.request("item/tool/call", map[string]any{"threadId": fakeThread, "turnId": fakeTurn, "callId": "c", "tool": "t", "arguments": map[string]any{}})
		f.hang(true)
	case scContextWindow:
		e := map[string]any{"message": "Codex ran out of room in the model's context window.", "codexErrorInfo": "contextWindowExceeded", "additionalDetails": nil}
		f.notify("error", map[string]any{"error": e, "willRetry": false, "threadId": fakeThread, "turnId": fakeTurn})
		f.complete("failed", e)
	case scFail, subagenttest.PromptFail:
		e := map[string]any{"message": "unexpected status 400 Bad Request: the model rejects this request", "codexErrorInfo": "badRequest", "additionalDetails": "request id req-7"}
		f.notify("error", map[string]any{"error": e, "willRetry": false, "threadId": fakeThread, "turnId": fakeTurn})
		f.complete("failed", e)
	case scFailObject:
		f.notify("error", map[string]any{"error": map[string]any{"message": "Reconnecting... 1/5", "codexErrorInfo": map[string]any{"responseStreamDisconnected": map[string]any{"httpStatusCode": 500}}},
			"willRetry": true, "threadId": fakeThread, "turnId": fakeTurn})
		f.complete("failed", map[string]any{"message": "stream disconnected before completion", "codexErrorInfo": map[string]any{"responseTooManyFailedAttempts": map[string]any{"httpStatusCode": 500}}})
	case scHang, subagenttest.PromptHang:
		f.hang(true)
	case scIgnore:
		signal.Ignore(syscall.SIGTERM)
		f.hang(false)
	case scCrash:
		f.item("item/started", map[string]any{"type": "agentMessage", "id": "m1", "text": "", "phase": nil})
		f.notify("item/agentMessage/delta", map[string]any{"threadId": fakeThread, "turnId": fakeTurn, "itemId": "m1", "delta": crashPartial})
		fmt.Fprintln(os.Stderr, "thread 'main' panicked: boom")
		os.Exit(3)
	case scHugeLine:
		os.Stdout.WriteString(`{"method":"warning","params":{"message":"` + strings.Repeat("x", hugeLineBytes) + "\"}}\n")
		f.hang(true)
	case scGarbage:
		os.Stdout.WriteString("this is not JSON-RPC {{{\n")
		f.hang(true)
	default:
		f.message("m1", "final_answer", "echo: "+prompt)
		f.complete("completed", nil)
	}
}

// hang waits for turn/interrupt; honour says whether it then ends the turn
// (and exits on stdin EOF).
func (f *fake) hang(honour bool) {
	for {
		m, ok := <-f.in
		if !ok {
			if honour {
				os.Exit(0)
			}
			select {} // ignores EOF
		}
		if method(m) == "turn/interrupt" {
			f.reply(m["id"], map[string]any{})
			if honour {
				f.complete("interrupted", nil)
				return
			}
		}
	}
}

// request sends a server request and returns the result it gets back.
func (f *fake) request(name string, params any) json.RawMessage {
	id := f.nextReq
	f.nextReq++
	f.send(map[string]any{"id": id, "method": name, "params": params})
	for {
		m := f.recv()
		if method(m) == "" && string(m["id"]) == fmt.Sprint(id) {
			if m["error"] != nil {
				return m["error"]
			}
			return m["result"]
		}
	}
}

// message emits an agent message item with phase (nil for null), streamed
// as the given deltas.
func (f *fake) message(id string, phase any, deltas ...string) {
	f.item("item/started", map[string]any{"type": "agentMessage", "id": id, "text": "", "phase": phase})
	for _, d := range deltas {
		f.notify("item/agentMessage/delta", map[string]any{"threadId": fakeThread, "turnId": fakeTurn, "itemId": id, "delta": d})
	}
	f.item("item/completed", map[string]any{"type": "agentMessage", "id": id, "text": strings.Join(deltas, ""), "phase": phase})
}

func (f *fake) item(method string, item map[string]any) {
	f.notify(method, map[string]any{"item": item, "threadId": fakeThread, "turnId": fakeTurn, "startedAtMs": 1})
}

func (f *fake) usage() {
	b := map[string]any{"totalTokens": 120, "inputTokens": 100, "cachedInputTokens": 40, "cacheWriteInputTokens": 0, "outputTokens": 20, "reasoningOutputTokens": 5}
	f.notify("thread/tokenUsage/updated", map[string]any{"threadId": fakeThread, "turnId": fakeTurn,
		"tokenUsage": map[string]any{"total": b, "last": b, "modelContextWindow": 1000}})
}

func (f *fake) complete(status string, err any) {
	f.notify("thread/status/changed", map[string]any{"threadId": fakeThread, "status": map[string]any{"type": "idle"}})
	f.notify("turn/completed", map[string]any{"threadId": fakeThread, "turn": turn(status, err, []any{})})
}

func turn(status string, err any, items []any) map[string]any {
	if items == nil {
		items = []any{}
	}
	return map[string]any{"id": fakeTurn, "status": status, "error": err, "items": items, "itemsView": "notLoaded"}
}

func (f *fake) reply(id json.RawMessage, result any) {
	f.send(map[string]any{"id": id, "result": result})
}

func (f *fake) notify(method string, params any) {
	f.send(map[string]any{"method": method, "params": params, "emittedAtMs": time.Now().UnixMilli()})
}

func (f *fake) send(m map[string]any) {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	os.Stdout.Write(append(b, '\n'))
}

// recv returns the next message; on stdin EOF the fake exits like Codex.
func (f *fake) recv() map[string]json.RawMessage {
	m, ok := <-f.in
	if !ok {
		os.Exit(0)
	}
	return m
}

// read feeds f.in with stdin's messages, logging each line.
func (f *fake) read() {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		logRaw(sc.Bytes())
		var m map[string]json.RawMessage
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			fmt.Fprintf(os.Stderr, "fake: bad line %q\n", sc.Text())
			continue
		}
		f.in <- m
		if f.deaf && method(m) == "thread/start" {
			select {} // reads no more: writes to its stdin block once the pipe is full
		}
	}
	close(f.in)
}

func method(m map[string]json.RawMessage) string {
	var s string
	json.Unmarshal(m["method"], &s)
	return s
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func logLine(v any) {
	b, _ := json.Marshal(v)
	logRaw(b)
}

func logRaw(b []byte) {
	path := os.Getenv(fakeLogEnv)
	if path == "" {
		return
	}
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	fh.Write(append(append([]byte(nil), b...), '\n'))
	fh.Close()
}
