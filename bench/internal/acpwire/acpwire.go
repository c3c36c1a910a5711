// Package acpwire is a minimal ndjson JSON-RPC client for an ACP agent run
// as a child process, timed the way the reference's acp-bench.mjs times its
// server: spawn → initialize answered, spawn → initialize + session/new
// answered (ready), then stdin closed and the time until the process exits
// (killed after a grace period).
package acpwire

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Times are one run's intervals.
type Times struct {
	Initialize  time.Duration // spawn → initialize answered
	Ready       time.Duration // spawn → initialize + session/new answered
	CloseToExit time.Duration // stdin closed → process exited
	Killed      bool          // the process did not exit within the grace
}

type msg struct {
	ID     *int64          `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// Ready spawns cmd, performs initialize and session/new (cwd), closes stdin
// and waits for the process to exit (SIGKILL after grace).
func Ready(cmd *exec.Cmd, cwd string, grace time.Duration) (Times, error) {
	var t Times
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return t, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return t, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return t, err
	}
	exited := make(chan error, 1)
	var mu sync.Mutex
	pending := map[int64]chan msg{}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			var m msg
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			if m.ID != nil && m.Method != "" { // a request from the agent
				fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":%d,"result":{"outcome":{"outcome":"cancelled"}}}`+"\n", *m.ID)
				continue
			}
			if m.ID == nil {
				continue
			}
			mu.Lock()
			ch := pending[*m.ID]
			delete(pending, *m.ID)
			mu.Unlock()
			if ch != nil {
				ch <- m
			}
		}
	}()
	go func() { <-readDone; exited <- cmd.Wait() }()
	next := int64(0)
	call := func(method, params string) (json.RawMessage, error) {
		next++
		ch := make(chan msg, 1)
		mu.Lock()
		pending[next] = ch
		mu.Unlock()
		if _, err := fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", next, method, params); err != nil {
			return nil, err
		}
		select {
		case m := <-ch:
			if len(m.Error) > 0 && string(m.Error) != "null" {
				return nil, fmt.Errorf("%s: %s", method, m.Error)
			}
			return m.Result, nil
		case <-readDone:
			return nil, fmt.Errorf("%s: the agent closed its stdout; stderr: %s", method, stderr.String())
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("%s: no answer within 30 s", method)
		}
	}
	fail := func(err error) (Times, error) {
		_ = cmd.Process.Kill()
		<-exited
		return t, err
	}
	if _, err := call("initialize", `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false}}`); err != nil {
		return fail(err)
	}
	t.Initialize = time.Since(t0)
	cwdJSON, _ := json.Marshal(cwd)
	res, err := call("session/new", `{"cwd":`+string(cwdJSON)+`,"mcpServers":[]}`)
	if err != nil {
		return fail(err)
	}
	t.Ready = time.Since(t0)
	var s struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(res, &s) != nil || s.SessionID == "" {
		return fail(errors.New("session/new answered without a sessionId: " + string(res)))
	}
	tc := time.Now()
	stdin.Close()
	select {
	case <-exited:
	case <-time.After(grace):
		t.Killed = true
		_ = cmd.Process.Kill()
		<-exited
	}
	t.CloseToExit = time.Since(tc)
	return t, nil
}
