package session

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/dsh-go/dsh/content"
)

// This file encodes the payloads a log writes most (turns, steps, chunks,
// messages, tool calls and results, request headers, inbox changes) without
// reflection. Its output is encoding/json's, byte for byte
// (TestFastEncoderMatchesJSON, FuzzFastEncoderMatchesJSON); a payload it
// does not know, or a raw value it cannot copy as it is, goes through codec.

// AppendString appends s as a JSON string, quoted and escaped as
// encoding/json does: '<', '>' and '&' as \u003c, \u003e and \u0026, U+2028
// and U+2029 escaped, and invalid UTF-8 as \ufffd.
func AppendString(buf []byte, s string) []byte { return appendString(buf, s, `\ufffd`) }

// appendPayloadString is AppendString as the codec writes payloads: invalid
// UTF-8 becomes U+FFFD itself, not its escape.
func appendPayloadString(buf []byte, s string) []byte { return appendString(buf, s, "\uFFFD") }

// appendString is AppendString writing bad, U+FFFD or its escape, for each
// byte of invalid UTF-8.
func appendString(buf []byte, s, bad string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		i += safePrefix(s[i:])
		if i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if safeASCII[c] {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			buf = append(buf, s[start:i]...)
			buf = append(buf, bad...)
		case r == '\u2028' || r == '\u2029':
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

const hexDigits = "0123456789abcdef"

// safePrefix returns how many of s's first bytes a JSON string holds as
// they are, eight at a time: it stops at the first word with a byte below
// ' ' or above DEL, or one of '"', '\\', '<', '>' and '&'.
func safePrefix[T string | []byte](s T) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		bad := w | (w - ones*' ') // high bit: a byte >= 0x80 or < ' '
		for _, c := range [...]uint64{'"', '\\', '<', '>', '&'} {
			x := w ^ (ones * c)
			bad |= (x - ones) &^ x // high bit where x's byte was 0 (or borrowed into)
		}
		if bad&highs != 0 {
			break
		}
	}
	return i
}

// safeASCII marks the ASCII bytes a JSON string holds as they are.
var safeASCII = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendData appends the payload d as encoding/json would; ok is false when
// d is not a payload this file encodes (buf is then returned unchanged).
func appendData(buf []byte, d any) (_ []byte, ok bool) {
	switch d := d.(type) {
	case TurnStart:
		buf = append(buf, `{"turn":`...)
		buf = strconv.AppendInt(buf, int64(d.Turn), 10)
		return append(buf, '}'), true
	case Step:
		return appendStep(buf, d.Turn, d.Step), true
	case TurnEnd:
		buf = append(buf, `{"turn":`...)
		buf = strconv.AppendInt(buf, int64(d.Turn), 10)
		buf = append(buf, `,"reason":{"kind":`...)
		buf = appendPayloadString(buf, d.Reason.Kind)
		if c := d.Reason.Cause; c != nil {
			buf = append(buf, `,"reason":{"kind":`...)
			buf = appendPayloadString(buf, c.Kind)
			if c.Reason != "" {
				buf = append(buf, `,"reason":`...)
				buf = appendPayloadString(buf, c.Reason)
			}
			buf = append(buf, '}')
		}
		if f := d.Reason.Error; f != nil {
			buf = append(buf, `,"error":`...)
			buf = appendFailure(buf, f)
		}
		return append(buf, '}', '}'), true
	case AssistantChunk:
		buf = appendStep(buf, int(d.Turn), int(d.Step))
		buf = append(buf[:len(buf)-1], `,"chunk":`...)
		buf = appendChunk(buf, &d.Chunk)
		if d.BlockFromDeltas {
			buf = append(buf, `,"blockFromDeltas":true`...)
		}
		return append(buf, '}'), true
	case AssistantMessage:
		buf = appendStep(buf, d.Turn, d.Step)
		buf = append(buf[:len(buf)-1], `,"message":`...)
		buf = appendMessage(buf, &d.Message)
		if d.Usage != nil {
			buf = append(buf, `,"usage":`...)
			buf = appendUsage(buf, d.Usage)
		}
		if d.Interrupted {
			buf = append(buf, `,"interrupted":true`...)
		}
		if len(d.SharedBlocks) > 0 {
			buf = append(buf, `,"sharedBlocks":[`...)
			for i, s := range d.SharedBlocks {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = append(buf, `{"block":`...)
				buf = strconv.AppendInt(buf, int64(s.Block), 10)
				buf = append(buf, `,"chunk":`...)
				buf = strconv.AppendInt(buf, int64(s.Chunk), 10)
				buf = append(buf, '}')
			}
			buf = append(buf, ']')
		}
		return append(buf, '}'), true
	case content.Message:
		return appendMessage(buf, &d), true
	case ToolCall:
		buf = appendStep(buf, d.Turn, d.Step)
		buf = append(buf[:len(buf)-1], `,"callId":`...)
		buf = appendPayloadString(buf, d.CallID)
		buf = append(buf, `,"name":`...)
		buf = appendPayloadString(buf, d.Name)
		buf = append(buf, `,"arguments":`...)
		buf = appendPayloadString(buf, d.Arguments)
		if d.ArgumentsInMessage {
			buf = append(buf, `,"argumentsInMessage":true`...)
		}
		return append(buf, '}'), true
	case ToolResult:
		start := len(buf)
		buf = appendStep(buf, d.Turn, d.Step)
		buf = append(buf[:len(buf)-1], `,"message":`...)
		buf = appendMessage(buf, &d.Message)
		if e := d.Error; e != nil {
			buf = append(buf, `,"error":{"name":`...)
			buf = appendPayloadString(buf, e.Name)
			buf = append(buf, `,"code":`...)
			buf = appendPayloadString(buf, e.Code)
			buf = append(buf, '}')
		}
		if len(d.Meta) > 0 {
			buf = append(buf, `,"meta":`...)
			if buf, ok = appendRaw(buf, d.Meta); !ok {
				return buf[:start], false
			}
		}
		if len(d.Usage) > 0 {
			buf = append(buf, `,"usage":{`...)
			keys := make([]string, 0, len(d.Usage))
			for k := range d.Usage {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for i, k := range keys {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = appendPayloadString(buf, k)
				buf = append(buf, ':')
				u := d.Usage[k]
				buf = appendUsage(buf, &u)
			}
			buf = append(buf, '}')
		}
		return append(buf, '}'), true
	case RequestHeader:
		start := len(buf)
		buf = append(buf, `{"config":{"provider":`...)
		buf = appendPayloadString(buf, d.Config.Provider)
		buf = append(buf, `,"model":`...)
		buf = appendPayloadString(buf, d.Config.Model)
		if d.Config.MaxTokens != 0 {
			buf = append(buf, `,"maxTokens":`...)
			buf = strconv.AppendInt(buf, int64(d.Config.MaxTokens), 10)
		}
		buf = append(buf, '}')
		if d.System != "" {
			buf = append(buf, `,"system":`...)
			buf = appendPayloadString(buf, d.System)
		}
		if len(d.Tools) > 0 {
			buf = append(buf, `,"tools":[`...)
			for i, t := range d.Tools {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = append(buf, `{"name":`...)
				buf = appendPayloadString(buf, t.Name)
				buf = append(buf, `,"description":`...)
				buf = appendPayloadString(buf, t.Description)
				buf = append(buf, `,"parameters":`...)
				if buf, ok = appendRaw(buf, t.Parameters); !ok {
					return buf[:start], false
				}
				buf = append(buf, '}')
			}
			buf = append(buf, ']')
		}
		buf = append(buf, `,"reason":`...)
		buf = appendPayloadString(buf, d.Reason)
		return append(buf, '}'), true
	case InboxSpliced:
		buf = append(buf, `{"target":`...)
		buf = appendPayloadString(buf, d.Target)
		if len(d.Inserted) > 0 {
			buf = append(buf, `,"inserted":[`...)
			for i := range d.Inserted {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = appendMessage(buf, &d.Inserted[i])
			}
			buf = append(buf, ']')
		}
		if len(d.Removed) > 0 {
			buf = append(buf, `,"removed":[`...)
			for i, s := range d.Removed {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = appendPayloadString(buf, s)
			}
			buf = append(buf, ']')
		}
		if d.Outcome != "" {
			buf = append(buf, `,"outcome":`...)
			buf = appendPayloadString(buf, d.Outcome)
		}
		return append(buf, '}'), true
	case EndSeed:
		return append(buf, '{', '}'), true
	case json.RawMessage:
		return appendRaw(buf, d)
	}
	return buf, false
}

// appendStep appends {"turn":t,"step":s}.
func appendStep(buf []byte, turn, step int) []byte {
	buf = append(buf, `{"turn":`...)
	buf = strconv.AppendInt(buf, int64(turn), 10)
	buf = append(buf, `,"step":`...)
	buf = strconv.AppendInt(buf, int64(step), 10)
	return append(buf, '}')
}

func appendMessage(buf []byte, m *content.Message) []byte {
	buf = append(buf, `{"id":`...)
	buf = appendPayloadString(buf, m.ID)
	buf = append(buf, `,"role":`...)
	buf = appendPayloadString(buf, string(m.Role))
	buf = append(buf, `,"content":`...)
	if m.Content == nil {
		buf = append(buf, "null"...)
	} else {
		buf = appendBlocks(buf, m.Content)
	}
	s := &m.Source
	buf = append(buf, `,"source":{"kind":`...)
	buf = appendPayloadString(buf, string(s.Kind))
	buf = appendOptString(buf, `,"plugin":`, s.Plugin)
	buf = appendOptString(buf, `,"form":`, s.Form)
	buf = appendOptString(buf, `,"provider":`, s.Provider)
	buf = appendOptString(buf, `,"model":`, s.Model)
	buf = appendOptString(buf, `,"callId":`, s.CallID)
	buf = appendOptString(buf, `,"sender":`, s.Sender)
	return append(buf, '}', '}')
}

func appendBlocks(buf []byte, blocks []content.Block) []byte {
	buf = append(buf, '[')
	for i := range blocks {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendBlock(buf, &blocks[i])
	}
	return append(buf, ']')
}

func appendBlock(buf []byte, b *content.Block) []byte {
	buf = append(buf, `{"type":`...)
	buf = appendPayloadString(buf, string(b.Type))
	buf = appendOptString(buf, `,"text":`, b.Text)
	buf = appendOptString(buf, `,"id":`, b.ID)
	buf = appendOptString(buf, `,"name":`, b.Name)
	buf = appendOptString(buf, `,"arguments":`, b.Arguments)
	buf = appendOptString(buf, `,"toolCallId":`, b.ToolCallID)
	if len(b.Content) > 0 {
		buf = append(buf, `,"content":`...)
		buf = appendBlocks(buf, b.Content)
	}
	if b.IsError {
		buf = append(buf, `,"isError":true`...)
	}
	if im := b.Image; im != nil {
		buf = append(buf, `,"attachment":{"id":`...)
		buf = appendPayloadString(buf, im.ID)
		buf = append(buf, `,"mediaType":`...)
		buf = appendPayloadString(buf, im.MediaType)
		buf = appendOptInt(buf, `,"bytes":`, im.Bytes)
		buf = appendOptInt(buf, `,"width":`, int64(im.Width))
		buf = appendOptInt(buf, `,"height":`, int64(im.Height))
		buf = append(buf, '}')
	}
	buf = appendOptString(buf, `,"signature":`, b.Signature)
	return append(buf, '}')
}

func appendChunk(buf []byte, c *content.Chunk) []byte {
	buf = append(buf, `{"type":`...)
	buf = appendPayloadString(buf, string(c.Type))
	buf = append(buf, `,"index":`...)
	buf = strconv.AppendInt(buf, int64(c.Index), 10)
	buf = appendOptString(buf, `,"blockType":`, string(c.BlockType))
	buf = appendOptString(buf, `,"text":`, c.Text)
	buf = appendOptString(buf, `,"id":`, c.ID)
	buf = appendOptString(buf, `,"name":`, c.Name)
	buf = appendOptString(buf, `,"argumentsDelta":`, c.ArgumentsDelta)
	if c.Block != nil {
		buf = append(buf, `,"block":`...)
		buf = appendBlock(buf, c.Block)
	}
	if c.Usage != nil {
		buf = append(buf, `,"usage":`...)
		buf = appendUsage(buf, c.Usage)
	}
	if f := c.Finish; f != nil {
		buf = append(buf, `,"finish":{"kind":`...)
		buf = appendPayloadString(buf, string(f.Kind))
		if f.Failure != nil {
			buf = append(buf, `,"failure":`...)
			buf = appendFailure(buf, f.Failure)
		}
		buf = append(buf, '}')
	}
	return append(buf, '}')
}

func appendUsage(buf []byte, u *content.Usage) []byte {
	buf = append(buf, `{"inputTokens":`...)
	buf = strconv.AppendInt(buf, u.Input, 10)
	buf = append(buf, `,"outputTokens":`...)
	buf = strconv.AppendInt(buf, u.Output, 10)
	buf = appendOptInt(buf, `,"cacheReadTokens":`, u.CacheRead)
	buf = appendOptInt(buf, `,"cacheWriteTokens":`, u.CacheWrite)
	buf = appendOptInt(buf, `,"reasoningTokens":`, u.Reasoning)
	return append(buf, '}')
}

func appendFailure(buf []byte, f *content.Failure) []byte {
	buf = append(buf, `{"message":`...)
	buf = appendPayloadString(buf, f.Message)
	buf = append(buf, `,"code":`...)
	buf = appendPayloadString(buf, f.Code)
	buf = appendOptInt(buf, `,"status":`, int64(f.Status))
	buf = appendOptInt(buf, `,"providerRetryAfterMs":`, f.RetryAfterMs)
	buf = appendOptString(buf, `,"requestId":`, f.RequestID)
	return append(buf, '}')
}

// appendOptString appends key and s unless s is empty (omitempty).
func appendOptString(buf []byte, key, s string) []byte {
	if s == "" {
		return buf
	}
	return appendPayloadString(append(buf, key...), s)
}

// appendOptInt appends key and n unless n is 0 (omitempty).
func appendOptInt(buf []byte, key string, n int64) []byte {
	if n == 0 {
		return buf
	}
	return strconv.AppendInt(append(buf, key...), n, 10)
}

// appendRaw appends a raw JSON value that encoding/json would write as it
// is: valid, compact, printable ASCII outside its escapes, and no '<', '>'
// or '&' (rawScanner). Anything else (ok false) is left to the codec, which
// compacts, escapes or refuses it.
func appendRaw(buf []byte, raw json.RawMessage) (_ []byte, ok bool) {
	sc := rawScanner{b: raw}
	if !sc.value(0) || sc.i != len(raw) {
		return buf, false // a nil RawMessage too: encoding/json writes null
	}
	return append(buf, raw...), true
}

// rawScanner checks that a raw JSON value is one the encoders copy as it
// is. It refuses what it need not accept (whitespace, non-ASCII, deep
// nesting): the codec then decides.
type rawScanner struct {
	b []byte
	i int
}

// maxRawDepth bounds the nesting rawScanner follows, well below the
// encoders' own limit.
const maxRawDepth = 100

func (s *rawScanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *rawScanner) value(depth int) bool {
	switch c := s.peek(); {
	case c == '{':
		if depth >= maxRawDepth {
			return false
		}
		s.i++
		if s.peek() == '}' {
			s.i++
			return true
		}
		for {
			if !s.string() || s.peek() != ':' {
				return false
			}
			s.i++
			if !s.value(depth + 1) {
				return false
			}
			switch s.peek() {
			case ',':
				s.i++
			case '}':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == '[':
		if depth >= maxRawDepth {
			return false
		}
		s.i++
		if s.peek() == ']' {
			s.i++
			return true
		}
		for {
			if !s.value(depth + 1) {
				return false
			}
			switch s.peek() {
			case ',':
				s.i++
			case ']':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == '"':
		return s.string()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	}
	return false
}

func (s *rawScanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

func (s *rawScanner) string() bool {
	if s.peek() != '"' {
		return false
	}
	for s.i++; s.i < len(s.b); s.i++ {
		if s.i += safePrefix(s.b[s.i:]); s.i == len(s.b) {
			return false
		}
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return true
		case c == '\\':
			s.i++
			switch s.peek() {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(s.b)-s.i < 5 {
					return false
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				s.i += 4
			default:
				return false
			}
		case c < ' ' || c >= utf8.RuneSelf || c == '<' || c == '>' || c == '&':
			return false
		}
	}
	return false
}

func (s *rawScanner) number() bool {
	if s.peek() == '-' {
		s.i++
	}
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case '1' <= c && c <= '9':
		s.digits()
	default:
		return false
	}
	if s.peek() == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

// digits skips a run of digits and reports whether there was one.
func (s *rawScanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}
