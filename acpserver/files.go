package acpserver

import (
	"context"
	"errors"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/dsh-go/dsh/agent"
	"github.com/dsh-go/dsh/tool/builtin"
)

// fileCallTimeout bounds one fs/* request to the client.
const fileCallTimeout = 30 * time.Second

// clientFiles reads and writes a session's files through the client's
// fs/read_text_file and fs/write_text_file: the editor's buffers, unsaved
// changes included.
type clientFiles struct {
	s           *server
	id          acpsdk.SessionId
	read, write bool // what the client offered
}

var _ builtin.Files = clientFiles{}

// call bounds a request to the client: fileCallTimeout, and the end of
// the client's input.
func (f clientFiles) call(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, fileCallTimeout)
	stop := context.AfterFunc(f.s.input, cancel)
	return ctx, func() { stop(); cancel() }
}

func (f clientFiles) ReadTextFile(ctx context.Context, path string) (string, error) {
	if !f.read {
		return "", errors.New("the client does not read files")
	}
	ctx, cancel := f.call(ctx)
	defer cancel()
	resp, err := f.s.connection().ReadTextFile(ctx, acpsdk.ReadTextFileRequest{SessionId: f.id, Path: path})
	return resp.Content, err
}

func (f clientFiles) WriteTextFile(ctx context.Context, path, content string) error {
	if !f.write {
		return errors.New("the client does not write files")
	}
	ctx, cancel := f.call(ctx)
	defer cancel()
	_, err := f.s.connection().WriteTextFile(ctx, acpsdk.WriteTextFileRequest{SessionId: f.id, Path: path, Content: content})
	return err
}

// useClientFiles is the Setup step that gives a session's agent the file
// tools that go through the client, when it offered fs/* (read_file for
// reading; write_file for writing; edit_file for both). Only the tools the
// agent sees are replaced.
func (s *server) useClientFiles(id acpsdk.SessionId) func(*agent.Agent) error {
	s.mu.Lock()
	fs := s.clientFS
	s.mu.Unlock()
	if s.opts.FileTools == nil || !fs.ReadTextFile && !fs.WriteTextFile {
		return nil
	}
	files := clientFiles{s: s, id: id, read: fs.ReadTextFile, write: fs.WriteTextFile}
	return func(a *agent.Agent) error {
		for _, def := range s.opts.FileTools(files) {
			switch def.Name {
			case "read_file":
				if !files.read {
					continue
				}
			case "write_file":
				if !files.write {
					continue
				}
			case "edit_file":
				if !files.read || !files.write {
					continue
				}
			}
			if !a.Tools().Has(def.Name) {
				continue
			}
			if _, err := a.Tools().Register(def); err != nil {
				return err
			}
		}
		return nil
	}
}
