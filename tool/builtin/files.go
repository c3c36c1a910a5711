package builtin

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dsh-go/dsh/tool"
)

const (
	defaultReadLimit = 2000 // lines read_file returns by default
	maxLineLen       = 2000 // bytes of one line read_file shows
	sniffLen         = 8 << 10
)

type readArgs struct {
	Path   string `json:"path" jsonschema:"the file to read, absolute or relative to the working directory"`
	Offset int    `json:"offset,omitempty" jsonschema:"the 1-based line to start at (default 1)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"the number of lines to read (default 2000)"`
}

func readFileTool(opts Options) tool.Definition {
	desc := fmt.Sprintf("Read a text file and return its lines numbered like cat -n, up to 2000 lines (or limit) from offset "+
		"and at most %d bytes; lines longer than %d bytes are cut. Directories and binary files are refused.", opts.OutputLimit, maxLineLen)
	return tool.Func("read_file", desc, true, func(ctx context.Context, call tool.Call, args readArgs) (tool.Result, error) {
		if args.Offset < 0 || args.Limit < 0 {
			return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "offset and limit must not be negative")
		}
		offset, limit := max(args.Offset, 1), args.Limit
		if limit == 0 {
			limit = defaultReadLimit
		}
		path := resolve(call.Cwd, args.Path)
		f, err := openText(path)
		if err != nil {
			return tool.Result{}, err
		}
		defer f.Close()
		r := bufio.NewReader(f)
		out := lines{limit: opts.OutputLimit}
		n := 0
		for {
			line, err := r.ReadString('\n')
			if line == "" && err != nil {
				if err != io.EOF {
					return tool.Result{}, tool.Errorf(tool.CodeFailed, "cannot read %s: %v", path, err)
				}
				break
			}
			if n++; n < offset {
				continue
			}
			if n >= offset+limit {
				fmt.Fprintf(&out, "[more lines follow; continue with offset=%d]\n", n)
				break
			}
			text := fmt.Sprintf("%6d\t%s", n, truncLine(strings.TrimRight(line, "\r\n"), maxLineLen))
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
		case n == 0:
			return tool.TextResult(fmt.Sprintf("(%s is empty)", path)), nil
		case n < offset:
			return tool.TextResult(fmt.Sprintf("(%s has only %d lines; offset %d is past the end)", path, n, offset)), nil
		}
		return tool.TextResult(out.String()), nil
	})
}

// openText opens path for reading, refusing directories and binary files.
func openText(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, statErr(path, err)
	}
	fail := func(err error) (*os.File, error) { f.Close(); return nil, err }
	if fi, err := f.Stat(); err != nil {
		return fail(statErr(path, err))
	} else if fi.IsDir() {
		return fail(tool.Errorf(tool.CodeFailed, "%s is a directory, not a file; use glob or bash ls to list it", path))
	}
	if binary, err := isBinary(f); err != nil {
		return fail(tool.Errorf(tool.CodeFailed, "cannot read %s: %v", path, err))
	} else if binary {
		return fail(tool.Errorf(tool.CodeFailed, "%s appears to be a binary file (it contains NUL bytes); refusing to read it", path))
	}
	return f, nil
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

type writeArgs struct {
	Path    string `json:"path" jsonschema:"the file to write, absolute or relative to the working directory"`
	Content string `json:"content" jsonschema:"the complete new content of the file"`
}

func writeFileTool() tool.Definition {
	const desc = "Create or overwrite a file with the given content, creating missing parent directories. " +
		"The file is replaced atomically; prefer edit_file for changing part of an existing file."
	return tool.Func("write_file", desc, false, func(ctx context.Context, call tool.Call, args writeArgs) (tool.Result, error) {
		path := resolve(call.Cwd, args.Path)
		if err := writeAtomic(path, []byte(args.Content)); err != nil {
			return tool.Result{}, err
		}
		return tool.TextResult(fmt.Sprintf("wrote %d bytes to %s", len(args.Content), path)), nil
	})
}

type editArgs struct {
	Path       string `json:"path" jsonschema:"the file to edit, absolute or relative to the working directory"`
	OldString  string `json:"old_string" jsonschema:"the exact text to replace; it must occur exactly once unless replace_all is set"`
	NewString  string `json:"new_string" jsonschema:"the replacement text"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence of old_string"`
}

func editFileTool() tool.Definition {
	const desc = "Replace an exact string in a text file with another. old_string must match the file exactly " +
		"(including whitespace) and occur once, unless replace_all is set."
	return tool.Func("edit_file", desc, false, func(ctx context.Context, call tool.Call, args editArgs) (tool.Result, error) {
		switch {
		case args.OldString == "":
			return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "old_string must not be empty; use write_file to create a file")
		case args.OldString == args.NewString:
			return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "old_string and new_string are identical; nothing to change")
		}
		path := resolve(call.Cwd, args.Path)
		f, err := openText(path)
		if err != nil {
			return tool.Result{}, err
		}
		data, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return tool.Result{}, tool.Errorf(tool.CodeFailed, "cannot read %s: %v", path, err)
		}
		text := string(data)
		switch n := strings.Count(text, args.OldString); {
		case n == 0:
			return tool.Result{}, tool.Errorf(tool.CodeFailed, "old_string not found in %s", path)
		case n > 1 && !args.ReplaceAll:
			return tool.Result{}, tool.Errorf(tool.CodeFailed,
				"old_string occurs %d times in %s; include more surrounding context to make it unique, or set replace_all", n, path)
		default:
			if err := writeAtomic(path, []byte(strings.ReplaceAll(text, args.OldString, args.NewString))); err != nil {
				return tool.Result{}, err
			}
			return tool.TextResult(fmt.Sprintf("replaced %d occurrence(s) in %s", n, path)), nil
		}
	})
}
