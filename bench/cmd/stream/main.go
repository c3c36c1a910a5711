// Command stream measures what the harness adds to a streamed answer: the
// latency from a chunk on the socket to its text on stdout, and the CPU per
// 1,000 streamed tokens, for `dsh run` (the real binary, built from the
// working tree) against a bare Go HTTP/SSE client reading the same stream
// (this binary re-executed with -client: it decodes each event's JSON and
// writes the text to stdout, unbuffered).
//
// A loopback OpenAI-compatible server (this process) streams -tokens text
// deltas at -rate tokens per second, each its own SSE event, and stamps
// each one just before writing it. The reader of the client's stdout (this
// process, same monotonic clock) stamps each token's arrival; a token is
// "w" and five digits and a space, so tokens are found in the output
// whatever the client prints around them. Latency = arrival − write.
//
// CPU per 1,000 tokens is the client process's user+system time for a run
// of -tokens tokens, minus a run of one token (start-up and exit), scaled.
// Runs alternate between the clients.
//
// The third client is dsh's interactive mode (the TUI) on a pseudo-terminal
// of -cols × -rows, the prompt given on its command line, quit with Ctrl+D
// once the answer is in: a token's latency is until the first frame that
// draws it. Its frames are the writes to the terminal (reads less than
// 2 ms apart are one frame) between the first token written and the last
// drawn; a missed frame is a frame interval (1/60 s, the renderer's rate)
// with text waiting that passed without one.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/creack/pty"

	"github.com/dsh-go/dsh/bench/internal/dshbin"
	"github.com/dsh-go/dsh/bench/internal/measure"
	"github.com/dsh-go/dsh/bench/internal/stats"
)

func main() {
	client := flag.String("client", "", "internal: be the bare SSE client of this URL")
	tokens := flag.Int("tokens", 1000, "text deltas per streamed answer")
	rate := flag.Int("rate", 200, "tokens per second the server streams (0: as fast as it can)")
	runs := flag.Int("runs", 3, "streamed answers per client")
	cols := flag.Int("cols", 100, "the TUI's terminal width")
	rows := flag.Int("rows", 40, "the TUI's terminal height")
	flag.Parse()
	if *client != "" {
		if err := bare(*client); err != nil {
			fmt.Fprintln(os.Stderr, "stream client:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*tokens, *rate, *runs, pty.Winsize{Cols: uint16(*cols), Rows: uint16(*rows)}); err != nil {
		fmt.Fprintln(os.Stderr, "stream:", err)
		os.Exit(1)
	}
}

// token returns the text of delta i: fixed width, found by scan.
func token(i int) string { return fmt.Sprintf("w%05d ", i) }

// server streams the answers; written[i] is when token i was written.
type server struct {
	mu      sync.Mutex
	tokens  int
	gap     time.Duration
	written []time.Time
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	n, gap := s.tokens, s.gap
	written := make([]time.Time, n)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	next := time.Now()
	for i := range n {
		if gap > 0 {
			next = next.Add(gap)
			time.Sleep(time.Until(next))
		}
		line := fmt.Sprintf("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", token(i))
		written[i] = time.Now()
		if _, err := io.WriteString(w, line); err != nil {
			return
		}
		fl.Flush()
	}
	fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", n)
	fl.Flush()
	s.mu.Lock()
	s.written = written
	s.mu.Unlock()
}

// result is one streamed answer read through one client.
type result struct {
	latency []float64 // ms per token
	cpu     time.Duration
	frames  []float64 // the TUI: ms between frames while the answer streamed
}

// client is a program that reads the stream.
type client struct {
	name string
	cmd  func() *exec.Cmd
	tui  bool // it draws on a terminal: run on a pseudo-terminal, quit with Ctrl+D
}

// frameInterval is the TUI renderer's frame interval (60 frames a second).
const frameInterval = time.Second / 60

func run(tokens, rate, runs int, size pty.Winsize) error {
	tmp, err := os.MkdirTemp("", "dsh-bench-stream-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin, err := dshbin.Build(tmp)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	srv := &server{}
	if rate > 0 {
		srv.gap = time.Second / time.Duration(rate)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	env, err := dshbin.Env(tmp, hs.URL)
	if err != nil {
		return err
	}
	clients := []client{
		{name: "bare Go SSE client", cmd: func() *exec.Cmd { return exec.Command(self, "-client", hs.URL) }},
		{name: "dsh run", cmd: func() *exec.Cmd {
			c := exec.Command(bin, "run", "--cwd", tmp, "say the tokens")
			c.Env = dshbin.Environ(env)
			return c
		}},
		{name: "dsh (TUI)", tui: true, cmd: func() *exec.Cmd {
			c := exec.Command(bin, "--cwd", tmp, "say the tokens")
			c.Env = append(dshbin.Environ(env), "TERM=xterm-256color", "COLORTERM=truecolor")
			return c
		}},
	}
	fmt.Printf("streamed answer, %d tokens at %d tokens/s, %d runs per client, %s %s/%s GOMAXPROCS=%d, load average %.2f\n",
		tokens, rate, runs, runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), measure.LoadAvg())
	lat := make([][]float64, len(clients))
	cpuN := make([][]float64, len(clients))
	cpu1 := make([][]float64, len(clients))
	var frames []float64 // the TUI's frame gaps, all runs
	nframes := 0
	for r := range runs {
		for j := range clients {
			c := clients[(r+j)%len(clients)]
			k := (r + j) % len(clients)
			res, err := stream(srv, c, tokens, size)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			lat[k] = append(lat[k], res.latency...)
			cpuN[k] = append(cpuN[k], float64(res.cpu.Microseconds()))
			if c.tui {
				frames = append(frames, res.frames...)
				nframes += len(res.frames) + 1
			}
			one, err := stream(srv, c, 1, size)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			cpu1[k] = append(cpu1[k], float64(one.cpu.Microseconds()))
		}
	}
	fmt.Printf("\n%-20s %12s %12s %12s %22s\n", "client", "p50 ms", "p99 ms", "max ms", "CPU ms / 1,000 tokens")
	for k, c := range clients {
		l := stats.Of(lat[k])
		per := (stats.Of(cpuN[k]).Median - stats.Of(cpu1[k]).Median) / float64(tokens-1) // µs per token
		fmt.Printf("%-20s %12.3f %12.3f %12.3f %22.1f\n", c.name, l.Median, l.P99, slices.Max(lat[k]), per)
	}
	if len(frames) > 0 {
		missed := 0
		var span float64
		for _, gap := range frames {
			span += gap
			// a gap of k intervals (rounded) had k−1 frames missing
			missed += max(int(gap/float64(frameInterval.Milliseconds())+0.5)-1, 0)
		}
		f := stats.Of(frames)
		fmt.Printf("\nTUI frames while streaming: %d in %.1f s (%.1f a second, %d runs), gap p50 %.1f ms, p99 %.1f ms, max %.1f ms; missed frames %d\n",
			nframes, span/1e3, float64(len(frames))/(span/1e3), runs, f.Median, f.P99, slices.Max(frames), missed)
	}
	return nil
}

// stream runs c against an answer of n tokens and reads its output: its
// stdout, or its terminal.
func stream(srv *server, c client, n int, size pty.Winsize) (result, error) {
	srv.mu.Lock()
	srv.tokens, srv.written = n, nil
	srv.mu.Unlock()
	cmd := c.cmd()
	var out io.Reader
	var stderr bytes.Buffer
	var term *os.File
	if c.tui {
		var err error
		if term, err = pty.StartWithSize(cmd, &size); err != nil {
			return result{}, err
		}
		defer term.Close()
		out = term
		stop := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() }) // a TUI that never quits
		defer stop.Stop()
	} else {
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			return result{}, err
		}
		out = pipe
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			return result{}, err
		}
	}
	arrived := make([]time.Time, n)
	var reads []time.Time // the TUI's writes to its terminal
	seen, quit := 0, false
	var pending []byte
	var transcript bytes.Buffer // the TUI's output, for an error
	buf := make([]byte, 64<<10)
	for {
		m, rerr := out.Read(buf)
		now := time.Now()
		if term != nil && m > 0 {
			reads = append(reads, now)
			if transcript.Len() < 1<<20 {
				transcript.Write(buf[:m])
			}
		}
		pending = append(pending, buf[:m]...)
		for {
			i := bytes.IndexByte(pending, 'w')
			if i < 0 || len(pending) < i+7 {
				if i < 0 {
					pending = pending[:0]
				} else {
					pending = pending[i:]
				}
				break
			}
			if v, err := strconv.Atoi(string(pending[i+1 : i+6])); err == nil && pending[i+6] == ' ' && v == seen && v < n {
				arrived[v] = now
				seen++
				pending = pending[i+7:]
				continue
			}
			pending = pending[i+1:]
		}
		if term != nil && seen == n && !quit && bytes.Contains(buf[:m], []byte("ready")) {
			// the answer is in and the turn over: leave
			_, _ = term.Write([]byte{4}) // Ctrl+D
			quit = true
		}
		if rerr != nil {
			break
		}
	}
	if err := cmd.Wait(); err != nil {
		return result{}, fmt.Errorf("%v: %.2000s", err, stderr.String())
	}
	if term != nil && seen != n {
		return result{}, fmt.Errorf("%d of %d tokens drawn; the last screen: %q", seen, n, lastBytes(transcript.Bytes(), 2000))
	}
	if seen != n {
		return result{}, fmt.Errorf("%d of %d tokens reached stdout", seen, n)
	}
	// The server stores its stamps after its last write, which the client
	// may have read and exited on already.
	var written []time.Time
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		srv.mu.Lock()
		written = srv.written
		srv.mu.Unlock()
		if len(written) == n || time.Now().After(deadline) {
			break
		}
	}
	if len(written) != n {
		return result{}, fmt.Errorf("the server wrote %d of %d tokens", len(written), n)
	}
	res := result{cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	for i := range n {
		res.latency = append(res.latency, float64(arrived[i].Sub(written[i]).Microseconds())/1e3)
	}
	// Frames: the reads from the first token written to the last drawn,
	// those less than 2 ms apart taken as one.
	var last time.Time
	for _, t := range reads {
		if t.Before(written[0]) || t.After(arrived[n-1]) {
			continue
		}
		if !last.IsZero() {
			if gap := t.Sub(last); gap < 2*time.Millisecond {
				continue
			} else {
				res.frames = append(res.frames, float64(gap.Microseconds())/1e3)
			}
		}
		last = t
	}
	return res, nil
}

// lastBytes is the end of b, at most n bytes.
func lastBytes(b []byte, n int) []byte { return b[max(len(b)-n, 0):] }

// bare is the reference client: one POST, each SSE event's JSON decoded,
// its text written to stdout at once.
func bare(url string) error {
	resp, err := http.Post(url+"/chat/completions", "application/json", bytes.NewReader([]byte(`{"stream":true}`)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok || string(line) == "[DONE]" {
			continue
		}
		var ev struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			return err
		}
		for _, c := range ev.Choices {
			if c.Delta.Content != "" {
				if _, err := os.Stdout.WriteString(c.Delta.Content); err != nil {
					return err
				}
			}
		}
	}
	return sc.Err()
}
