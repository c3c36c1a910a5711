package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/llmtest"
)

// procStat reads the state and parent PID of pid ("" and 0 when it is gone).
func procStat(pid int) (state string, ppid int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return "", 0
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0], ppid
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	state, _ := procStat(pid)
	return state != "" && state != "Z" && state != "X"
}

// descendants lists the live descendants of pid.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil || !alive(n) {
			continue
		}
		_, ppid := procStat(n)
		children[ppid] = append(children[ppid], n)
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// waitFile waits (bounded) for a file holding a PID and returns the PID.
func waitFile(t *testing.T, path string, dsh *exec.Cmd, stderr *strings.Builder) int {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("%s holds %q", path, b)
			}
			return pid
		}
		if time.Now().After(deadline) {
			dsh.Process.Kill()
			t.Fatalf("%s never appeared; dsh said: %s", path, stderr.String())
		}
	}
}

// sleeper is the command the model runs: a background sleep with its
// output redirected (so nothing waits for it), then a foreground one.
const sleeper = "sleep 1000 > /dev/null 2>&1 & echo $! > bg.pid; echo $$ > fg.pid; sleep 1000"

// Whatever kills dsh — SIGKILL, SIGHUP, SIGTERM — takes along every process
// it started: the supervisor, the shell, its foreground and background
// sleeps, and an ACP child (`command: self`) with everything it started.
func TestNoProcessOutlivesDsh(t *testing.T) {
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case len(r.ToolResults) > 0:
			return llmtest.Reply{Text: "unexpected: the sleeper returned"}
		case r.LastUser == "delegate":
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "subagent_isolated",
				Arguments: `{"description":"sleep","prompt":"run the sleeper"}`}}
		}
		return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: fmt.Sprintf(`{"command":%q}`, sleeper)}}
	})
	for _, prompt := range []string{"run the sleeper", "delegate"} {
		for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGHUP, syscall.SIGTERM} {
			t.Run(fmt.Sprintf("%s/%v", prompt, sig), func(t *testing.T) {
				home, cwd := t.TempDir(), t.TempDir()
				config := filepath.Join(home, "dsh.yaml")
				os.WriteFile(config, []byte(`subagents:
  providers:
    - name: isolated
      kind: acp
      acp: {command: self}
  tools:
    - provider: isolated
      toolName: subagent_isolated
`), 0o644)
				dsh := exec.Command(dshBinary, "run", "--cwd", cwd, prompt)
				dsh.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DSH_CONFIG=" + config,
					"DEEPSEEK_API_KEY=sk-test", "DEEPSEEK_BASE_URL=" + srv.URL}
				var stderr strings.Builder
				dsh.Stderr = &stderr
				if err := dsh.Start(); err != nil {
					t.Fatal(err)
				}
				bg := waitFile(t, filepath.Join(cwd, "bg.pid"), dsh, &stderr)
				fg := waitFile(t, filepath.Join(cwd, "fg.pid"), dsh, &stderr)
				want := 3 // the supervisor and two sleeps (bash execs the last command)
				if prompt == "delegate" {
					want++ // the ACP child
				}
				tree := descendants(dsh.Process.Pid)
				for deadline := time.Now().Add(20 * time.Second); len(tree) < want; tree = descendants(dsh.Process.Pid) {
					if time.Now().After(deadline) {
						dsh.Process.Kill()
						t.Fatalf("dsh's process tree is %v", tree)
					}
					time.Sleep(10 * time.Millisecond)
				}
				if err := dsh.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				dsh.Wait()
				for _, pid := range append(tree, bg, fg) {
					for deadline := time.Now().Add(20 * time.Second); alive(pid); time.Sleep(20 * time.Millisecond) {
						if time.Now().After(deadline) {
							state, ppid := procStat(pid)
							syscall.Kill(pid, syscall.SIGKILL)
							t.Fatalf("process %d (state %s, parent %d) of dsh's tree %v outlives it; dsh said: %s", pid, state, ppid, tree, stderr.String())
						}
					}
				}
			})
		}
	}
}

// probe runs as the model's bash command: for the supervisor ($PPID) and
// dsh (its parent) it counts what it finds of the sentinels' shared word in
// their environ, cmdline and memory (or says "denied"), then in its own
// environment; two controls show the counting works. The word is built at
// run time so that the command itself never holds it.
const probe = `w=SENT; w+=INEL
count() { grep -ac "$w"; }
mem() {
  exec 3</proc/$1/mem 2>/dev/null || { echo denied; return; }
  local n=0 range perms rest start end
  while read -r range perms rest; do
    [[ $perms == r* ]] || continue
    start=$((16#${range%-*})); end=$((16#${range#*-}))
    (( end - start > 268435456 )) && continue
    n=$((n + $(dd if=/proc/$1/mem bs=65536 iflag=skip_bytes,count_bytes skip=$start count=$((end-start)) 2>/dev/null | count)))
  done < /proc/$1/maps
  exec 3<&-
  echo $n
}
dsh=$(awk '{print $4}' /proc/$PPID/stat)
for who in supervisor:$PPID dsh:$dsh; do
  name=${who%:*} pid=${who#*:}
  for f in environ cmdline; do
    if data=$(tr '\0' '\n' < /proc/$pid/$f 2>/dev/null); then echo "$name $f $(count <<<"$data")"; else echo "$name $f denied"; fi
  done
  echo "$name mem $(mem $pid)"
done
echo "own environ $(env | count)"
echo "control file $(count < planted.txt)"
echo "control mem $(mem $$)"
echo "uid $(id -u)"
cat planted.txt`

// A command the model runs cannot obtain any credential dsh holds — from
// its environment, from /proc/<dsh>/environ, cmdline or mem, as root and as
// an unprivileged user, sandboxed or not — whether the key's variable is
// named like one or not (apiKeyEnv: LLM_BEARER) and whether it sits in a
// base URL; and no credential reaches a file, an error, the output or a
// request body. (TestAPIKeyNeverLeaks checks the same in process.)
func TestCommandsCannotReadCredentials(t *testing.T) {
	secrets := []string{"sk-SENTINEL-bearer-7f3a", "sk-SENTINEL-deepseek-91c2", "SENTINEL-url-query-55d0", "SENTINEL-userinfo-0b8e"}
	var bodies strings.Builder
	srv := llmtest.NewServer(t, func(r llmtest.Request) llmtest.Reply {
		bodies.WriteString(r.LastUser + "\n" + strings.Join(r.ToolResults, "\n") + "\n")
		switch {
		case r.LastUser == "fail":
			return llmtest.Reply{Status: 401, Body: `{"error":{"message":"invalid api key"}}`}
		case len(r.ToolResults) == 0:
			return llmtest.Reply{ToolCall: &llmtest.ToolCall{Name: "bash", Arguments: fmt.Sprintf(`{"command":%q}`, probe)}}
		}
		return llmtest.Reply{Text: "PROBE\n" + r.ToolResults[0]}
	})
	users := []int{os.Geteuid()}
	if os.Geteuid() == 0 {
		users = append(users, 65534) // nobody
		if err := os.Chmod(filepath.Dir(dshBinary), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, uid := range users {
		for _, mode := range []string{"workspace-write", "full"} {
			t.Run(fmt.Sprintf("uid=%d/%s", uid, mode), func(t *testing.T) {
				home, cwd := ownedDir(t, uid), ownedDir(t, uid)
				config := filepath.Join(home, "dsh.yaml")
				os.WriteFile(config, []byte(fmt.Sprintf(`agent: {route: bearer}
models:
  - name: bearer
    baseURL: %s/v1?key=%s
    apiKeyEnv: LLM_BEARER
    model: deepseek-flash
    passBackReasoning: true
tools: {sandbox: %s}
`, srv.URL, secrets[2], mode)), 0o644)
				os.WriteFile(filepath.Join(cwd, "planted.txt"), []byte("KEY="+secrets[0]+"\n"), 0o644)
				for _, dir := range []string{home, cwd} {
					filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, uid, uid) })
				}
				env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "DSH_HOME=" + home, "DSH_CONFIG=" + config,
					"LLM_BEARER=" + secrets[0], "DEEPSEEK_API_KEY=" + secrets[1],
					"DEEPSEEK_BASE_URL=" + strings.Replace(srv.URL, "://", "://user:"+secrets[3]+"@", 1)}
				var out, errs strings.Builder
				for _, prompt := range []string{"probe", "fail"} {
					dsh := exec.Command(dshBinary, "-v", "run", "--cwd", cwd, prompt)
					dsh.Env, dsh.Stdout, dsh.Stderr = env, &out, &errs
					if uid != os.Geteuid() {
						dsh.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
					}
					err := dsh.Run()
					if (err != nil) != (prompt == "fail") {
						t.Fatalf("dsh run %s: %v\n%s", prompt, err, errs.String())
					}
				}
				report := map[string]string{}
				sc := bufio.NewScanner(strings.NewReader(out.String()))
				for sc.Scan() {
					f := strings.Fields(sc.Text())
					if len(f) == 3 {
						report[f[0]+" "+f[1]] = f[2]
					}
				}
				for _, k := range []string{"supervisor environ", "supervisor cmdline", "supervisor mem", "dsh environ", "dsh cmdline", "dsh mem", "own environ"} {
					if v := report[k]; v != "0" && v != "denied" {
						t.Errorf("%s: %q (want 0 or denied)", k, v)
					}
				}
				if report["dsh mem"] != "denied" || report["dsh environ"] != "denied" {
					t.Errorf("dsh's memory and environ must be closed to its commands: %v", report)
				}
				if report["control file"] != "1" || report["control mem"] == "0" || report["control mem"] == "denied" {
					t.Errorf("the probe's controls failed, so it proves nothing: %v\n%s", report, out.String())
				}
				if !strings.Contains(out.String(), "uid "+strconv.Itoa(uid)) || !strings.Contains(out.String(), "KEY=[REDACTED]") {
					t.Errorf("output: %s", out.String())
				}
				texts := map[string]string{"stdout": out.String(), "stderr": errs.String(), "request bodies": bodies.String()}
				for _, dir := range []string{home, cwd} {
					filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
						if err == nil && fi.Mode().IsRegular() && p != config && filepath.Base(p) != "planted.txt" {
							b, _ := os.ReadFile(p)
							texts[p] = string(b)
						}
						return nil
					})
				}
				if len(texts) < 5 {
					t.Fatalf("no session files under %s", home)
				}
				for where, text := range texts {
					for _, s := range secrets {
						if strings.Contains(text, s) {
							t.Errorf("%s appears in %s: %s", s, where, text)
						}
					}
				}
			})
		}
	}
}

// ownedDir is a new directory that uid owns and may reach.
func ownedDir(t *testing.T, uid int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dsh-secrecy-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	return dir
}
