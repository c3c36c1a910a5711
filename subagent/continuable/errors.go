package continuable

import (
	"fmt"

	"github.com/dsh-go/dsh/subagent"
)

func errorf(code subagent.Code, format string, args ...any) *subagent.Error {
	return &subagent.Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) *subagent.Error {
	return errorf(subagent.CodeInvalidRequest, format, args...)
}
