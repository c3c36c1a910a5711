package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/sandbox"
	"github.com/dsh-go/dsh/tool"
	"github.com/dsh-go/dsh/tool/toolname"
)

type bashArgs struct {
	Command   string `json:"command" jsonschema:"the command line, run with bash -c"`
	TimeoutMS int    `json:"timeout_ms,omitempty" jsonschema:"timeout in milliseconds, at most 600000"`
}

func bashTool(opts Options, guard *gitGuard) tool.Definition {
	desc := fmt.Sprintf("Run a shell command with bash -c in the working directory and return its combined stdout and stderr "+
		"(at most %d bytes; the middle of longer output is omitted). Stdin is empty; the command is killed after %v unless "+
		"timeout_ms says otherwise; processes it leaves in the background are killed when it ends.%s",
		opts.OutputLimit, opts.BashTimeout, sandboxNote(opts.Sandbox))
	return tool.Func(toolname.Bash, desc, false, func(ctx context.Context, call tool.Call, args bashArgs) (tool.Result, error) {
		timeout := opts.BashTimeout
		switch {
		case args.TimeoutMS < 0:
			return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "timeout_ms must not be negative")
		case args.TimeoutMS > 0:
			timeout = min(time.Duration(args.TimeoutMS)*time.Millisecond, MaxBashTimeout)
		}
		dir := resolve(call.Cwd, ".")
		end := guard.begin(dir)
		res, err := runBash(ctx, dir, args.Command, timeout, opts.OutputLimit, sandbox.For(opts.mode(ctx), dir).WithNetwork(opts.Network))
		if note := end(); note != "" && err == nil {
			res.Content = append(res.Content, content.Text("\n"+note))
		}
		return res, err
	})
}

// sandboxNote tells the model what the sandbox allows.
func sandboxNote(m sandbox.Mode) string {
	switch m {
	case sandbox.ReadOnly:
		return " Commands cannot write files (a read-only sandbox)."
	case sandbox.WorkspaceWrite:
		return " Commands can write only under the working directory and the temporary directories (a sandbox)."
	}
	return ""
}

// runBash runs command in its own process group (see internal/proc: it is
// supervised, hardened and sandboxed by policy) and kills the whole group
// when the command ends, when ctx is done or when timeout expires.
func runBash(ctx context.Context, dir, command string, timeout time.Duration, limit int, policy sandbox.Policy) (tool.Result, error) {
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p, err := proc.Start(proc.Spec{Path: "bash", Args: []string{"-c", command}, Dir: dir, MergeStderr: true, Sandbox: policy})
	if err != nil {
		return tool.Result{}, tool.Errorf(tool.CodeFailed, "cannot run command: %v", err)
	}
	p.Stdin().Close() // stdin is empty
	out := &headTail{limit: limit}
	copied := make(chan struct{})
	go func() {
		io.Copy(out, p.Stdout())
		close(copied)
	}()
	select {
	case <-p.Done():
	case <-runCtx.Done():
	}
	p.Stop(0, 0) // kills what is left of the group; bounded even when something escaped it
	<-copied

	text := out.String()
	var ee *proc.ExitError
	switch err := p.Err(); {
	case ctx.Err() != nil:
		return tool.Result{}, fmt.Errorf("command aborted: %w", ctx.Err())
	case runCtx.Err() != nil:
		return textResult(CodeTimeout, fmt.Sprintf("%scommand timed out after %v and was killed", withNL(text), timeout)), nil
	case errors.As(err, &ee) && ee.Signal != 0:
		return textResult(CodeExitStatus, fmt.Sprintf("%scommand killed by signal %v", withNL(text), ee.Signal)), nil
	case errors.As(err, &ee):
		return textResult(CodeExitStatus, fmt.Sprintf("%sexit code %d", withNL(text), ee.Code)), nil
	case err != nil:
		return tool.Result{}, tool.Errorf(tool.CodeFailed, "command failed: %v", err)
	case text == "":
		return tool.TextResult("(no output)"), nil
	}
	return tool.TextResult(text), nil
}

// textResult is an error result showing text as is.
func textResult(code, text string) tool.Result {
	return tool.Result{Content: []content.Block{content.Text(text)}, IsError: true, Code: code}
}

// withNL returns s ending in a newline, or empty.
func withNL(s string) string {
	if s == "" || strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

// headTail is a writer keeping the first and last bytes of a stream, limit
// bytes in all.
type headTail struct {
	limit      int
	head, tail []byte
	total      int
}

func (w *headTail) Write(p []byte) (int, error) {
	n := len(p)
	w.total += n
	if room := w.limit/2 - len(w.head); room > 0 {
		k := min(room, len(p))
		w.head, p = append(w.head, p[:k]...), p[k:]
	}
	w.tail = append(w.tail, p...)
	if keep := w.limit - w.limit/2; len(w.tail) > 2*keep {
		w.tail = append(w.tail[:0], w.tail[len(w.tail)-keep:]...)
	}
	return n, nil
}

// String returns the output, its middle replaced by a marker when it
// exceeded the limit.
func (w *headTail) String() string {
	if w.total <= w.limit {
		return string(w.head) + string(w.tail)
	}
	head, tail := w.head, w.tail[max(0, len(w.tail)-(w.limit-w.limit/2)):]
	if i := lastRuneStart(head); i >= 0 && !utf8.FullRune(head[i:]) {
		head = head[:i]
	}
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return fmt.Sprintf("%s\n[… %d bytes omitted …]\n%s", head, w.total-len(head)-len(tail), tail)
}

// lastRuneStart returns the index of the last rune start among the final
// bytes of b, or -1.
func lastRuneStart(b []byte) int {
	for i := len(b) - 1; i >= max(0, len(b)-utf8.UTFMax); i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return -1
}
