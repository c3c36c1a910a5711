package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/dsh-go/dsh/sandbox"
	"github.com/dsh-go/dsh/tool"
	"github.com/dsh-go/dsh/tool/toolname"
)

const (
	defaultReadLimit = 2000 // lines read_file returns by default
	maxLineLen       = 2000 // bytes of one line read_file shows
	sniffLen         = 8 << 10
	readBufSize      = 64 << 10
)

// MaxEditBytes is the largest file edit_file reads, and the largest result
// it writes: a bigger file or a replacement that would grow one past it is
// refused with an error naming the limit.
const MaxEditBytes = 10 << 20

type readArgs struct {
	Path   string `json:"path" jsonschema:"the file to read, absolute or relative to the working directory"`
	Offset int    `json:"offset,omitempty" jsonschema:"the 1-based line to start at (default 1)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"the number of lines to read (default 2000)"`
}

func readFileTool(opts Options, files Files) tool.Definition {
	desc := fmt.Sprintf("Read a text file and return its lines numbered like cat -n, up to 2000 lines (or limit) from offset "+
		"and at most %d bytes; lines longer than %d bytes are cut. Directories, binary files and anything that is not "+
		"a regular file (pipes, devices, sockets) are refused.", opts.OutputLimit, maxLineLen)
	return tool.Func(toolname.ReadFile, desc, true, func(ctx context.Context, call tool.Call, args readArgs) (tool.Result, error) {
		if args.Offset < 0 || args.Limit < 0 {
			return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "offset and limit must not be negative")
		}
		offset, limit := max(args.Offset, 1), args.Limit
		if limit == 0 {
			limit = defaultReadLimit
		}
		path := resolve(call.Cwd, args.Path)
		if err := checkRead(opts.readPolicy(ctx, call.Cwd), "read_file", path); err != nil {
			return tool.Result{}, err
		}
		f, _, err := openText(ctx, path)
		if err != nil {
			return tool.Result{}, err
		}
		defer f.Close()
		var src io.Reader = f
		if text, ok := readThrough(ctx, files, path); ok {
			src = strings.NewReader(text) // the editor's buffer, unsaved changes included
		}
		// A line is kept to a few bytes past maxLineLen, for truncLine to cut
		// it on a rune boundary.
		lr := newLineReader(ctx, src, maxLineLen+utf8.UTFMax)
		out := lines{limit: opts.OutputLimit}
		n := 0
		for {
			line, err := lr.next()
			if errors.Is(err, errNUL) {
				fmt.Fprintf(&out, "[line %d holds NUL bytes: binary data from there on; stopping]\n", n+1)
				break
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return tool.Result{}, readErr(ctx, path, err)
			}
			if n++; n < offset {
				continue
			}
			if n >= offset+limit {
				fmt.Fprintf(&out, "[more lines follow; continue with offset=%d]\n", n)
				break
			}
			text := fmt.Sprintf("%6d\t%s", n, truncLine(string(line), maxLineLen))
			if !out.add(text) {
				if out.Len() == 0 {
					out.add(truncLine(text, opts.OutputLimit/2))
					n++
				}
				fmt.Fprintf(&out, "[output limit reached; continue with offset=%d]\n", n)
				break
			}
		}
		switch {
		case n == 0 && out.Len() == 0:
			return tool.TextResult(fmt.Sprintf("(%s is empty)", path)), nil
		case n < offset && out.Len() == 0:
			return tool.TextResult(fmt.Sprintf("(%s has only %d lines; offset %d is past the end)", path, n, offset)), nil
		}
		return tool.TextResult(out.String()), nil
	})
}

// readErr explains a failed read: the call's cancellation, or the I/O error.
func readErr(ctx context.Context, path string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return tool.Errorf(tool.CodeFailed, "cannot read %s: %v", path, err)
}

// openRegular opens path for reading only if it is a regular file (a
// symbolic link to one counts). Pipes, devices and sockets are refused
// before they are opened, since opening or reading one can block forever
// (a FIFO without a writer, a terminal) or read someone else's stream
// (/dev/stdin under dsh acp holds the protocol's frames). The open itself is
// non-blocking and the opened file is checked again, so a file swapped for
// a FIFO in between cannot block either.
func openRegular(path string) (*os.File, fs.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, statErr(path, err)
	}
	if err := checkRegular(path, fi); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, statErr(path, err)
	}
	ofi, err := f.Stat()
	if err == nil {
		err = checkRegular(path, ofi)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, ofi, nil
}

// checkRegular refuses directories and anything else that is not a
// regular file.
func checkRegular(path string, fi fs.FileInfo) error {
	switch m := fi.Mode(); {
	case m.IsDir():
		return tool.Errorf(tool.CodeFailed, "%s is a directory, not a file; use glob or bash ls to list it", path)
	case !m.IsRegular():
		return tool.Errorf(tool.CodeFailed, "%s is not a regular file (it is a %s); refusing to read it", path, fileKind(m))
	}
	return nil
}

// fileKind names the type of a file that is not regular.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}

// openText opens a regular file for reading, refusing binary files (a NUL
// byte in the first 8 KiB).
func openText(ctx context.Context, path string) (*os.File, fs.FileInfo, error) {
	f, fi, err := openRegular(path)
	if err != nil {
		return nil, nil, err
	}
	binary, err := isBinary(f)
	if err == nil {
		err = ctx.Err()
	}
	switch {
	case err != nil:
		f.Close()
		return nil, nil, readErr(ctx, path, err)
	case binary:
		f.Close()
		return nil, nil, tool.Errorf(tool.CodeFailed, "%s appears to be a binary file (it contains NUL bytes); refusing to read it", path)
	}
	return f, fi, nil
}

// isBinary reports whether the first 8 KiB of f hold a NUL byte and rewinds f.
func isBinary(f *os.File) (bool, error) {
	buf := make([]byte, sniffLen)
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return false, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
	return bytes.IndexByte(buf[:n], 0) >= 0, nil
}

// errNUL reports a NUL byte past a file's sniffed head: binary data.
var errNUL = errors.New("NUL byte")

// lineReader reads a file line by line in bounded memory: it keeps at most
// max bytes of a line and skips the rest, stops at a NUL byte, and checks
// ctx before each read.
type lineReader struct {
	ctx  context.Context
	r    *bufio.Reader
	max  int
	line []byte
	cut  bool // the last line was longer than max
}

func newLineReader(ctx context.Context, r io.Reader, max int) *lineReader {
	return &lineReader{ctx: ctx, r: bufio.NewReaderSize(r, readBufSize), max: max}
}

// next returns the next line without its line ending, cut to max bytes
// (valid until the next call). After the last line it returns io.EOF; at a
// NUL byte, errNUL.
func (l *lineReader) next() ([]byte, error) {
	l.line = l.line[:0]
	total, started := 0, false
	for {
		if err := l.ctx.Err(); err != nil {
			return nil, err
		}
		chunk, err := l.r.ReadSlice('\n')
		if bytes.IndexByte(chunk, 0) >= 0 {
			return nil, errNUL
		}
		started = started || len(chunk) > 0
		ended := err == nil
		if ended {
			chunk = chunk[:len(chunk)-1]
		}
		total += len(chunk)
		if room := l.max - len(l.line); room > 0 {
			l.line = append(l.line, chunk[:min(room, len(chunk))]...)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err != nil && err != io.EOF:
			return nil, err
		case err == io.EOF && !started:
			return nil, io.EOF
		}
		if l.cut = total > l.max; !l.cut {
			l.line = bytes.TrimSuffix(l.line, []byte("\r"))
		}
		return l.line, nil
	}
}

type writeArgs struct {
	Path    string `json:"path" jsonschema:"the file to write, absolute or relative to the working directory"`
	Content string `json:"content" jsonschema:"the complete new content of the file"`
}

// linkRule is the part of write_file's and edit_file's descriptions about
// symbolic links.
const linkRule = " A symbolic link is written through (the link stays); a path inside the working directory " +
	"whose links lead outside it is refused."

// writeRule is the part of write_file's and edit_file's descriptions about
// where they may write: what the sandbox mode m allows, and the files no
// tool writes.
func writeRule(m sandbox.Mode) string {
	var where string
	switch m {
	case sandbox.ReadOnly:
		where = " Writing is refused everywhere (a read-only sandbox)."
	case sandbox.WorkspaceWrite:
		where = " Files can be written only under the working directory and the temporary directories (a sandbox)."
	}
	return where + " dsh's configuration and home directory, git hooks and git configuration (.git/hooks, .git/config) " +
		"are never written."
}

func writeFileTool(opts Options, files Files) tool.Definition {
	desc := "Create or overwrite a file with the given content, creating missing parent directories. " +
		"The file is replaced atomically; prefer edit_file for changing part of an existing file." + linkRule + writeRule(opts.Sandbox)
	return tool.Func(toolname.WriteFile, desc, false, func(ctx context.Context, call tool.Call, args writeArgs) (tool.Result, error) {
		path := resolve(call.Cwd, args.Path)
		dest, err := destination(call.Cwd, path)
		if err != nil {
			return tool.Result{}, err
		}
		if err := opts.checkWrite(ctx, "write_file", resolve(call.Cwd, "."), path, dest); err != nil {
			return tool.Result{}, err
		}
		if err := writeThrough(ctx, files, dest, []byte(args.Content)); err != nil {
			return tool.Result{}, err
		}
		return tool.TextResult(fmt.Sprintf("wrote %d bytes to %s", len(args.Content), written(path, dest))), nil
	})
}

// written names the file a write reached: path, and its destination when
// path is a symbolic link.
func written(path, dest string) string {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Sprintf("%s (→ %s)", path, dest)
	}
	return path
}

// destination returns where a write to path lands once every symbolic link
// on the way is followed, a dangling last one included (its target is
// created). A path inside the working directory cwd (the process's when
// empty) whose destination is outside it is refused: a link planted in a
// workspace must not redirect a write that names a workspace file to, say,
// ~/.bashrc. A path outside cwd was named on purpose and is followed
// wherever it leads; whether it may be written there is checkWrite's call.
func destination(cwd, path string) (string, error) {
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	dest, err := realPath(path)
	if err != nil {
		return "", tool.Errorf(tool.CodeFailed, "cannot resolve %s: %v", path, err)
	}
	if !within(cwd, path) {
		return dest, nil
	}
	realCwd, err := realPath(cwd)
	if err != nil {
		return "", tool.Errorf(tool.CodeFailed, "cannot resolve the working directory %s: %v", cwd, err)
	}
	if !within(realCwd, dest) {
		return "", tool.Errorf(tool.CodeFailed, "%s leads through a symbolic link to %s, outside the working directory %s; "+
			"links are not followed out of it: if that file is really meant, name it by its own path", path, dest, cwd)
	}
	return dest, nil
}

// within reports whether path is dir or below it; both are clean and absolute.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// maxLinkHops bounds the symbolic links realPath follows, as the kernel does.
const maxLinkHops = 40

// realPath resolves every symbolic link in the absolute path p, including
// a dangling last one, and keeps the trailing components that do not exist
// yet.
func realPath(p string) (string, error) {
	var rest []string // components below p that do not exist, outermost first
	for hops := 0; ; {
		fi, err := os.Lstat(p)
		switch {
		case err == nil && fi.Mode()&fs.ModeSymlink != 0:
			if hops++; hops > maxLinkHops {
				return "", fmt.Errorf("too many levels of symbolic links")
			}
			target, err := os.Readlink(p)
			if err != nil {
				return "", err
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(p), target)
			}
			p = filepath.Clean(target)
		case err == nil:
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				return "", err
			}
			return filepath.Join(append([]string{real}, rest...)...), nil
		case errors.Is(err, fs.ErrNotExist) && filepath.Dir(p) != p:
			rest = append([]string{filepath.Base(p)}, rest...)
			p = filepath.Dir(p)
		default:
			return "", err
		}
	}
}

type editArgs struct {
	Path       string `json:"path" jsonschema:"the file to edit, absolute or relative to the working directory"`
	OldString  string `json:"old_string" jsonschema:"the exact text to replace; it must occur exactly once unless replace_all is set"`
	NewString  string `json:"new_string" jsonschema:"the replacement text"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence of old_string"`
}

func editFileTool(opts Options, files Files) tool.Definition {
	desc := fmt.Sprintf("Replace an exact string in a text file with another. old_string must match the file exactly "+
		"(including whitespace) and occur once, unless replace_all is set. Files over %d MiB, and edits that would make "+
		"one, are refused.", MaxEditBytes>>20) + linkRule + writeRule(opts.Sandbox)
	return tool.Func(toolname.EditFile, desc, false, func(ctx context.Context, call tool.Call, args editArgs) (tool.Result, error) {
		switch {
		case args.OldString == "":
			return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "old_string must not be empty; use write_file to create a file")
		case args.OldString == args.NewString:
			return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "old_string and new_string are identical; nothing to change")
		}
		path := resolve(call.Cwd, args.Path)
		dest, err := destination(call.Cwd, path)
		if err != nil {
			return tool.Result{}, err
		}
		if err := opts.checkWrite(ctx, "edit_file", resolve(call.Cwd, "."), path, dest); err != nil {
			return tool.Result{}, err
		}
		data, err := readForEdit(ctx, dest)
		if err != nil {
			return tool.Result{}, err
		}
		if text, ok := readThrough(ctx, files, dest); ok {
			if len(text) > MaxEditBytes {
				return tool.Result{}, tool.Errorf(tool.CodeFailed, "%s is over edit_file's limit of %d bytes (%d MiB) in the editor; edit it with bash",
					path, MaxEditBytes, MaxEditBytes>>20)
			}
			data = []byte(text) // the editor's buffer, unsaved changes included
		}
		old, repl := []byte(args.OldString), []byte(args.NewString)
		n := bytes.Count(data, old)
		switch {
		case n == 0:
			return tool.Result{}, tool.Errorf(tool.CodeFailed, "old_string not found in %s", path)
		case n > 1 && !args.ReplaceAll:
			return tool.Result{}, tool.Errorf(tool.CodeFailed,
				"old_string occurs %d times in %s; include more surrounding context to make it unique, or set replace_all", n, path)
		}
		// Compute the size first: n × a growth can exceed memory long
		// before a replacement would be built.
		if size := int64(len(data)) + int64(n)*(int64(len(repl))-int64(len(old))); size > MaxEditBytes {
			return tool.Result{}, tool.Errorf(tool.CodeFailed, "replacing %d occurrence(s) would make %s %d bytes, over edit_file's "+
				"limit of %d bytes (%d MiB); make a smaller change, or rewrite the file with bash", n, path, size, MaxEditBytes, MaxEditBytes>>20)
		}
		if err := writeThrough(ctx, files, dest, bytes.ReplaceAll(data, old, repl)); err != nil {
			return tool.Result{}, err
		}
		return tool.TextResult(fmt.Sprintf("replaced %d occurrence(s) in %s", n, written(path, dest))), nil
	})
}

// readForEdit reads a text file of at most MaxEditBytes, honouring ctx.
func readForEdit(ctx context.Context, path string) ([]byte, error) {
	f, fi, err := openText(ctx, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > MaxEditBytes {
		return nil, tool.Errorf(tool.CodeFailed, "%s is %d bytes, over edit_file's limit of %d bytes (%d MiB); edit it with bash",
			path, fi.Size(), MaxEditBytes, MaxEditBytes>>20)
	}
	buf := bytes.NewBuffer(make([]byte, 0, fi.Size()+1))
	_, err = buf.ReadFrom(io.LimitReader(ctxReader{ctx, f}, MaxEditBytes+1))
	switch {
	case err != nil:
		return nil, readErr(ctx, path, err)
	case buf.Len() > MaxEditBytes: // it grew since the stat
		return nil, tool.Errorf(tool.CodeFailed, "%s is over edit_file's limit of %d bytes (%d MiB); edit it with bash",
			path, MaxEditBytes, MaxEditBytes>>20)
	}
	return buf.Bytes(), nil
}

// ctxReader fails reads once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
