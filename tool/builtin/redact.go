package builtin

import (
	"context"
	"errors"

	"github.com/dsh-go/dsh/content"
	"github.com/dsh-go/dsh/tool"
)

// redacted returns defs with redact applied to the text of their results
// and errors (defs unchanged when redact is nil).
func redacted(redact func(string) string, defs ...tool.Definition) []tool.Definition {
	if redact == nil {
		return defs
	}
	for i, def := range defs {
		execute := def.Execute
		defs[i].Execute = func(ctx context.Context, call tool.Call) (tool.Result, error) {
			res, err := execute(ctx, call)
			for j, b := range res.Content {
				if b.Type == content.TypeText {
					res.Content[j].Text = redact(b.Text)
				}
			}
			if err != nil {
				if msg := redact(err.Error()); msg != err.Error() {
					var te *tool.Error
					code := tool.CodeFailed
					if errors.As(err, &te) {
						code = te.Code
					}
					err = &tool.Error{Code: code, Msg: msg}
				}
			}
			return res, err
		}
	}
	return defs
}
