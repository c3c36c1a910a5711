package builtin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/internal/proc"
	"github.com/dsh-go/dsh/tool"
)

// waitDelay bounds how long bash waits for output after the shell exited,
// when a background process still holds the output pipe.
const waitDelay = time.Second

type bashArgs struct {
	Command   string `json:"command" jsonschema:"the command line, run with bash -c"`
	TimeoutMS int    `json:"timeout_ms,omitempty" jsonschema:"timeout in milliseconds, at most 600000"`
}

func bashTool(opts Options) tool.Definition {
	desc := fmt.Sprintf("Run a shell command with bash -c in the working directory and return its combined stdout and stderr "+
		"(at most %d bytes; the middle of longer output is omitted). Stdin is empty; the command is killed after %v unless "+
		"timeout_ms says otherwise; background processes must redirect their output.", opts.OutputLimit, opts.BashTimeout)
	return tool.Func("bash", desc, false, func(ctx context.Context, call tool.Call, args bashArgs) (tool.Result, error) {
		timeout := opts.BashTimeout
		switch {
		case args.TimeoutMS < 0:
			return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "timeout_ms must not be negative")
		case args.TimeoutMS > 0:
			timeout = min(time.Duration(args.TimeoutMS)*time.Millisecond, MaxBashTimeout)
		}
		return runBash(ctx, resolve(call.Cwd, "."), args.Command, timeout, opts.OutputLimit)
	})
}

// runBash runs command in its own process group and kills the whole group
// when ctx is done or timeout expires.
func runBash(ctx context.Context, dir, command string, timeout time.Duration, limit int) (tool.Result, error) {
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := &headTail{limit: limit}
	cmd := exec.Command("bash", "-c", command)
	cmd.Dir = dir
	// Commands the model runs never see the harness's credentials.
	cmd.Env = proc.ScrubEnv(os.Environ(), nil)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		return tool.Result{}, tool.Errorf(tool.CodeFailed, "cannot run command: %v", err)
	}
	pgid := cmd.Process.Pid
	stop := context.AfterFunc(runCtx, func() { syscall.Kill(-pgid, syscall.SIGKILL) })
	err := cmd.Wait()
	stop()

	text := out.String()
	switch {
	case ctx.Err() != nil:
		return tool.Result{}, fmt.Errorf("command aborted: %w", ctx.Err())
	case runCtx.Err() != nil:
		return textResult(CodeTimeout, fmt.Sprintf("%scommand timed out after %v and was killed", withNL(text), timeout)), nil
	case cmd.ProcessState == nil:
		return tool.Result{}, tool.Errorf(tool.CodeFailed, "command failed: %v", err)
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		return textResult(CodeExitStatus, fmt.Sprintf("%scommand killed by signal %v", withNL(text), ws.Signal())), nil
	case ws.ExitStatus() != 0:
		return textResult(CodeExitStatus, fmt.Sprintf("%sexit code %d", withNL(text), ws.ExitStatus())), nil
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
