package builtin

import (
	"context"

	"github.com/dsh-go/dsh/tool"
)

// Files is an editor's view of the files (ACP's fs/read_text_file and
// fs/write_text_file): its buffers, unsaved changes included.
type Files interface {
	// ReadTextFile returns the text of the file at the absolute path.
	ReadTextFile(ctx context.Context, path string) (string, error)
	// WriteTextFile replaces the text of the file at the absolute path.
	WriteTextFile(ctx context.Context, path, content string) error
}

// FileTools returns read_file, write_file and edit_file reading and
// writing through files, after the same checks as the disk's tools (the
// file exists and is text, the sandbox and the protected files allow the
// write, no link leads out of the working directory). A failed read or
// write through files falls back to the disk.
func FileTools(opts Options, files Files) []tool.Definition {
	opts = opts.withDefaults()
	return redacted(opts.Redact, readFileTool(opts, files), writeFileTool(opts, files), editFileTool(opts, files))
}

// readThrough reads path through files; ok is false without files or when
// the read failed.
func readThrough(ctx context.Context, files Files, path string) (string, bool) {
	if files == nil {
		return "", false
	}
	text, err := files.ReadTextFile(ctx, path)
	return text, err == nil
}

// writeThrough writes data to dest through files, else (or when that
// fails) atomically to the disk.
func writeThrough(ctx context.Context, files Files, dest string, data []byte) error {
	if files != nil && files.WriteTextFile(ctx, dest, string(data)) == nil {
		return nil
	}
	return writeAtomic(dest, data)
}
