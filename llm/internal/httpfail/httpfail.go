// Package httpfail turns a model endpoint's error response into one of
// dsh's failure codes (see package llm), the same way on every route.
package httpfail

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dsh-go/dsh/llm"
)

// IsLoopback reports whether host names this machine.
func IsLoopback(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Text is the message of an error body: error.message (or error,
// message, detail) of a JSON body, else the body's text, on one line and at
// most 512 bytes.
func Text(raw []byte) string {
	var body struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  string          `json:"detail"`
	}
	text := ""
	if json.Unmarshal(raw, &body) == nil {
		var nested struct {
			Message string `json:"message"`
		}
		var plain string
		switch {
		case json.Unmarshal(body.Error, &nested) == nil && nested.Message != "":
			text = nested.Message
		case json.Unmarshal(body.Error, &plain) == nil && plain != "":
			text = plain
		default:
			text = cmp.Or(body.Message, body.Detail)
		}
	}
	if text == "" {
		text = string(raw)
	}
	text = strings.Join(strings.Fields(strings.ToValidUTF8(text, "\uFFFD")), " ")
	if len(text) > 512 {
		i := 512
		for i > 0 && !utf8.RuneStart(text[i]) {
			i--
		}
		text = text[:i] + "…"
	}
	return cmp.Or(text, "(empty body)")
}

// Classify maps an error status and its message to a failure code.
func Classify(status int, text string) string {
	b := strings.ToLower(text)
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(b, w) {
				return true
			}
		}
		return false
	}
	quota := has("quota", "balance", "insufficient")
	unknownModel := strings.Contains(b, "model") &&
		has("not exist", "does not exist", "not found", "not supported", "supported api model names", "unknown model", "invalid model", "model_not_found") ||
		status == http.StatusNotFound && strings.HasPrefix(b, "model: ") // Anthropic's
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return llm.CodeAuth
	case status == http.StatusPaymentRequired, status == http.StatusTooManyRequests && quota,
		status == http.StatusBadRequest && has("credit balance"):
		return llm.CodeQuota
	case status == http.StatusTooManyRequests:
		return llm.CodeRateLimit
	case (status == http.StatusBadRequest || status == http.StatusNotFound) && unknownModel:
		return llm.CodeUnknownModel
	case status == http.StatusBadRequest && has("context length", "context_length", "context window", "overflow", "prompt is too long"):
		return llm.CodeContextExceeded
	case status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge:
		return llm.CodeInvalidRequest
	case status == http.StatusUnprocessableEntity:
		return llm.CodeInvalidParams
	case status >= 500:
		return llm.CodeServer
	}
	return "HTTP_" + strconv.Itoa(status)
}

// Route names what an error message's hint refers to.
type Route struct {
	Name    string // the route, e.g. "deepseek"
	KeyEnv  string // the variable holding its key ("" for none)
	BaseURL string
}

// Message is the one-line message of an error response classified as
// code: the endpoint's text, with what the user can do about it.
func Message(r Route, resp *http.Response, text, code, model string) string {
	msg := fmt.Sprintf("%s: HTTP %s: %s", r.Name, resp.Status, text)
	switch code {
	case llm.CodeAuth:
		if r.KeyEnv == "" {
			msg += " (this route sends no key: set models[].apiKeyEnv to the variable holding one)"
		} else {
			msg += fmt.Sprintf(" (the key is read from %s: check that it holds a valid key for %s)", r.KeyEnv, r.BaseURL)
		}
	case llm.CodeQuota:
		if resp.StatusCode == http.StatusPaymentRequired || resp.StatusCode == http.StatusBadRequest {
			msg = fmt.Sprintf("%s: insufficient balance (HTTP %s): %s: top up the account behind %s", r.Name, resp.Status, text, r.KeyEnv)
		}
	case llm.CodeUnknownModel:
		msg = fmt.Sprintf("%s: the endpoint does not serve model %q: %s. Pick a model with `dsh run -m MODEL`, or agent.model "+
			"or models[].model in dsh.yaml; `dsh doctor` lists the models %s serves", r.Name, model, strings.TrimSuffix(text, "."), r.BaseURL)
	case llm.CodeContextExceeded:
		msg += " (the conversation is longer than the model's context window: start a new session, or use a route whose model has a larger one)"
	}
	return msg
}

// RetryAfterMs reads a response's Retry-After header, seconds or an HTTP
// date, as milliseconds to wait (0 for none or a value out of range).
func RetryAfterMs(h http.Header) int64 {
	ra := strings.TrimSpace(h.Get("Retry-After"))
	if ra == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(ra, 64); err == nil {
		if s > 0 && s < 1e9 {
			return int64(s * 1000)
		}
		return 0
	}
	if t, err := http.ParseTime(ra); err == nil {
		return max(time.Until(t).Milliseconds(), 0)
	}
	return 0
}
