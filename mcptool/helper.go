package mcptool

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/sandbox"
)

// Bounds of a headers helper.
const (
	// HeadersHelperTimeout bounds one run of a server's headersHelper.
	HeadersHelperTimeout = 10 * time.Second
	// maxHelperOutput bounds what dsh reads of a helper's stdout.
	maxHelperOutput = 64 << 10
)

// helperHeaders runs the server's headersHelper, as Claude Code does: a
// shell command, run when dsh connects, that prints a JSON object of
// header names to string values; they are sent besides (and over) the
// block's headers. It runs like a stdio server: in dsh's directory, with
// dsh's environment minus credentials plus the block's passEnv, under the
// sandbox of the commands dsh runs; CLAUDE_CODE_MCP_SERVER_NAME and
// CLAUDE_CODE_MCP_SERVER_URL name the server.
func (s *server) helperHeaders(ctx context.Context, cfg ServerConfig) (map[string]string, error) {
	fail := func(format string, args ...any) error {
		return &Error{Code: CodeUnavailable, Server: s.name, Msg: "headersHelper " + fmt.Sprintf(format, args...)}
	}
	dir := s.set.opts.Dir
	policy := sandbox.For(s.set.opts.Sandbox.Or(sandbox.Default), dir).WithNetwork(s.set.opts.Network)
	p, err := proc.Start(proc.Spec{Path: "/bin/sh", Args: []string{"-c", cfg.HeadersHelper}, Dir: dir, BaseEnv: s.set.opts.BaseEnv,
		PassEnv: cfg.PassEnv, Env: []string{"CLAUDE_CODE_MCP_SERVER_NAME=" + s.name, "CLAUDE_CODE_MCP_SERVER_URL=" + cfg.URL},
		Sandbox: policy})
	if err != nil {
		return nil, fail("cannot start: %v", err)
	}
	p.Stdin().Close()
	var wg sync.WaitGroup
	var out strings.Builder
	wg.Go(func() {
		io.Copy(&out, io.LimitReader(p.Stdout(), maxHelperOutput+1))
		io.Copy(io.Discard, p.Stdout())
	})
	timer := time.NewTimer(HeadersHelperTimeout)
	defer timer.Stop()
	var ended string
	select {
	case <-p.Done():
	case <-timer.C:
		ended = fmt.Sprintf("did not finish within %s", HeadersHelperTimeout)
	case <-ctx.Done():
		ended = "was stopped: " + context.Cause(ctx).Error()
	}
	p.Stop(0, s.set.opts.StopGrace)
	wg.Wait()
	switch {
	case ended != "":
		return nil, fail("%s", ended)
	case p.Err() != nil:
		return nil, fail("failed: %s", p.Diagnostic())
	case out.Len() > maxHelperOutput:
		return nil, fail("printed more than %d bytes", maxHelperOutput)
	}
	var headers map[string]string
	if err := json.Unmarshal([]byte(out.String()), &headers); err != nil {
		return nil, fail("must print a JSON object of header names to string values, printed %q", cut(strings.TrimSpace(out.String()), 200))
	}
	for k, v := range headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") || strings.ContainsAny(v, "\r\n") {
			return nil, fail("printed a header that is not one: %q", cut(k, 100))
		}
	}
	merged := maps.Clone(cfg.Headers)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, headers)
	return merged, nil
}
