package session

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/dsh-go/dsh/content"
)

// hardStrings are strings whose JSON encodings differ between encoders:
// escapes, HTML characters, line separators, invalid UTF-8.
var hardStrings = []string{
	"", "plain", "quote \" and \\ backslash", "\b\f\n\r\t\x00\x01\x1f\x7f",
	"<script>&amp;</script>", "line\u2028sep\u2029para", "bad \xff\xfe utf-8 \xe2\x82", "é 日本 🙂",
	"\xed\xa0\x80 surrogate", "mixed <\u2028\xff\"\n>",
}

// rawSeeds are raw JSON values: some copied as they are, some the codec's.
var rawSeeds = []string{
	`{"type":"object","properties":{"a":{"type":"string","description":"say \"hi\" \u00e9\/\n"}}}`,
	`[1,-0.5e+3,0,-0,1E400,true,false,null,{},[],""]`, `"\ud800"`, `{"a":1,"a":2}`, `{"a" :1}`, `[01]`, `[1.]`,
	`[-]`, `"\x"`, `"\u12"`, `[1,]`, `{"a":1,}`, `tru`, `"<"`, "\"\x7f\"", `[[[[[[[[[[]]]]]]]]]]`, `{"é":1}`,
}

// payloadsOf returns one payload of every type the fast encoder knows,
// with s in every string and n in every number.
func payloadsOf(s string, n int64) []any {
	blk := content.Block{Type: content.BlockType(s), Text: s, ID: s, Name: s, Arguments: s, ToolCallID: s,
		Content: []content.Block{{Type: content.TypeText, Text: s}}, IsError: n%2 == 0,
		Image: &content.ImageRef{ID: s, MediaType: s, Bytes: n, Width: int(n), Height: int(-n)}, Signature: s}
	msg := content.Message{ID: s, Role: content.Role(s), Content: []content.Block{blk, {}, content.Text(s)},
		Source: content.Source{Kind: content.SourceKind(s), Plugin: s, Form: s, Provider: s, Model: s, CallID: s, Sender: s}}
	failure := &content.Failure{Message: s, Code: s, Status: int(n), RetryAfterMs: n, RequestID: s}
	usage := &content.Usage{Input: n, Output: -n, CacheRead: n, CacheWrite: n + 1, Reasoning: n}
	return []any{
		TurnStart{Turn: int(n)}, Step{Turn: int(n), Step: int(-n)},
		TurnEnd{Turn: int(n), Reason: EndReason{Kind: s}},
		TurnEnd{Turn: int(n), Reason: EndReason{Kind: s, Cause: &Cause{Kind: s, Reason: s}, Error: failure}},
		TurnEnd{Reason: EndReason{Cause: &Cause{}, Error: &content.Failure{}}},
		AssistantChunk{Turn: int32(n), Step: int32(n), Chunk: content.Chunk{Type: content.ChunkType(s), Index: int(n),
			BlockType: content.BlockType(s), Text: s, ID: s, Name: s, ArgumentsDelta: s, Block: &blk, Usage: usage,
			Finish: &content.Finish{Kind: content.FinishKind(s), Failure: failure}}, BlockFromDeltas: true},
		AssistantChunk{Chunk: content.Chunk{Finish: &content.Finish{}, Block: &content.Block{}, Usage: &content.Usage{}}},
		AssistantMessage{Turn: int(n), Step: 1, Message: msg, Usage: usage, Interrupted: true,
			SharedBlocks: []SharedBlock{{Block: int(n), Chunk: 2}, {}}},
		AssistantMessage{Message: content.Message{Content: []content.Block{}}},
		AssistantMessage{SharedBlocks: []SharedBlock{}},
		msg, content.Message{},
		ToolCall{Turn: 1, Step: int(n), CallID: s, Name: s, Arguments: s, ArgumentsInMessage: true}, ToolCall{},
		ToolResult{Turn: 1, Step: 2, Message: msg, Error: &ErrorInfo{Name: s, Code: s}, Meta: json.RawMessage(`{"k":[1,2.50,"v w"],"n":null}`),
			Usage: map[string]content.Usage{s: *usage, "a/b": {}, s + "z": {Input: n}}},
		ToolResult{Meta: json.RawMessage(`{ "spaced" : true }`)},
		ToolResult{Meta: json.RawMessage(`"<html>"`), Usage: map[string]content.Usage{}},
		RequestHeader{Config: RequestConfig{Provider: s, Model: s, MaxTokens: int(n)}, System: s, Reason: s,
			Tools: []content.ToolSpec{{Name: s, Description: s, Parameters: json.RawMessage(`{"type":"object"}`)}, {Name: s}}},
		RequestHeader{Tools: []content.ToolSpec{{Parameters: json.RawMessage(`{"type":"object"}`)}}},
		RequestHeader{Tools: []content.ToolSpec{{Parameters: json.RawMessage(rawSeeds[0])}, {Parameters: json.RawMessage(rawSeeds[1])}}},
		InboxSpliced{Target: s, Inserted: []content.Message{msg, {}}, Removed: []string{s, ""}, Outcome: s},
		InboxSpliced{Inserted: []content.Message{}, Removed: []string{}},
		EndSeed{},
		json.RawMessage(`{"version":2,"mode":"one-shot","provider":"spawn"}`), json.RawMessage(`[1, 2]`),
		json.RawMessage(`"\u0041"`), json.RawMessage(`{"a":1,"a":2}`), json.RawMessage(`1e400`), json.RawMessage(nil),
		LLMRetry{Provider: s, Failure: failure}, // not a fast type: the codec's
	}
}

// checkEncoders compares the event envelope of every payload with the
// codec's and, for the payload, with encoding/json's.
func checkEncoders(t *testing.T, s string, n int64) {
	t.Helper()
	for i, d := range payloadsOf(s, n) {
		e := Event{Seq: n, Time: n, Type: TypeToolResult, Data: d, SourceEventSeqs: []int64{n}, Ignorable: true}
		got, gotErr := e.AppendJSON([]byte("prefix"))
		want, wantErr := appendJSONByCodec(e, []byte("prefix"))
		if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("payload %d (%T), %q: fast encoder\n%s (%v)\ncodec\n%s (%v)", i, d, s, got, gotErr, want, wantErr)
		}
		std, stdErr := json.Marshal(d)
		fast, ok := appendData(nil, d)
		if ok && utf8.ValidString(s) && (stdErr != nil || !bytes.Equal(fast, std)) {
			t.Fatalf("payload %d (%T), %q: fast encoder\n%s\nencoding/json\n%s (%v)", i, d, s, fast, std, stdErr)
		}
	}
}

// appendJSONByCodec is AppendJSON with every payload through the codec.
func appendJSONByCodec(e Event, buf []byte) ([]byte, error) {
	data, err := jsonv2.Marshal(e.Data, codec)
	if err != nil {
		return buf, err
	}
	v, _ := json.Marshal(Event{Type: e.Type, Seq: e.Seq, Time: e.Time, SourceEventSeqs: e.SourceEventSeqs,
		Ignorable: e.Ignorable, Data: json.RawMessage(data)})
	return append(buf, v...), nil
}

func TestFastEncoderMatchesJSON(t *testing.T) {
	for _, s := range hardStrings {
		for _, n := range []int64{0, 1, -7, 1 << 62} {
			checkEncoders(t, s, n)
		}
	}
	for c := range 256 {
		checkEncoders(t, string([]byte{byte(c)}), int64(c))
	}
	// Usage keys that sort one way as bytes and collide once invalid UTF-8
	// is replaced.
	for _, keys := range [][]string{{"\xff", "\ufffd"}, {"\xffa", "\ufffdb", "\ufffd"}, {"b", "\xff", "a\xff", "a\ufffd"}} {
		m := map[string]content.Usage{}
		for i, k := range keys {
			m[k] = content.Usage{Input: int64(i)}
		}
		e := Event{Type: TypeToolResult, Data: ToolResult{Usage: m}}
		got, _ := e.AppendJSON(nil)
		if want, _ := appendJSONByCodec(e, nil); !bytes.Equal(got, want) {
			t.Fatalf("usage keys %q: fast encoder\n%s\ncodec\n%s", keys, got, want)
		}
	}
	for _, r := range []rune{0x7f, 0x80, 0x7ff, 0x800, 0x2027, 0x2028, 0x2029, 0x202a, 0xfffd, 0xffff, 0x10000, 0x10ffff} {
		checkEncoders(t, string(r), 1)
	}
}

// TestAppendStringMatchesEncodingJSON holds AppendString to encoding/json
// for every byte and for strings split at every point.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	all := strings.Join(hardStrings, "")
	for i := range len(all) + 1 {
		for _, s := range []string{all[:i], all[i:]} {
			want, _ := json.Marshal(s)
			if got := AppendString(nil, s); !bytes.Equal(got, want) {
				t.Fatalf("%q: got %s, want %s", s, got, want)
			}
		}
	}
}

// TestEventTypeIsJSONEscaped: an event type a plugin names with a control
// character or quote still makes a line that reads back.
func TestEventTypeIsJSONEscaped(t *testing.T) {
	for _, typ := range []string{"x/\x01\x7f", `x/"quoted"`, "x/<&>", "x/\xff"} {
		b, err := Event{Type: typ, Data: json.RawMessage(`{}`), Ignorable: true}.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(b) {
			t.Fatalf("%q: invalid line %s", typ, b)
		}
		ev, err := new(Decoder).Decode(b)
		if err != nil || ev.Type != strings.ToValidUTF8(typ, "\uFFFD") {
			t.Fatalf("%q: read back %q, %v", typ, ev.Type, err)
		}
	}
}

// TestFastEncoderHugeResult encodes a 10 MB tool result (text that needs
// escapes every few bytes) as encoding/json does, in one pass.
func TestFastEncoderHugeResult(t *testing.T) {
	text := strings.Repeat("line <1>\t\"quoted\" é\n", 10<<20/24)
	d := ToolResult{Turn: 1, Step: 1, Message: content.Message{ID: "m", Role: content.RoleUser,
		Content: []content.Block{{Type: content.TypeToolResult, ToolCallID: "c", Content: []content.Block{content.Text(text)}}},
		Source:  content.Source{Kind: content.SourceTool, CallID: "c"}}}
	got, ok := appendData(nil, d)
	want, err := json.Marshal(d)
	if !ok || err != nil || !bytes.Equal(got, want) {
		t.Fatalf("ok %v, err %v, %d bytes against %d", ok, err, len(got), len(want))
	}
}

// FuzzFastEncoderMatchesJSON: for any string and number in every field of
// every payload type, the fast encoder writes what the codec and
// encoding/json write.
func FuzzFastEncoderMatchesJSON(f *testing.F) {
	for _, s := range hardStrings {
		f.Add(s, int64(len(s)))
	}
	for _, raw := range rawSeeds {
		f.Add(raw, int64(0))
	}
	f.Fuzz(func(t *testing.T, s string, n int64) {
		checkEncoders(t, s, n)
		var raw [8]byte
		binary.LittleEndian.PutUint64(raw[:], uint64(n))
		for _, r := range []string{s, string(raw[:]), `{"k":` + s + `}`, `["` + s + `"]`} {
			d := json.RawMessage(r)
			got, ok := appendData(nil, d)
			want, err := jsonv2.Marshal(d, codec)
			if ok && (err != nil || !bytes.Equal(got, want)) {
				t.Fatalf("raw %q: fast %s, codec %s (%v)", r, got, want, err)
			}
		}
	})
}

// TestRawScanner: the raw values the fast encoder copies are the valid
// ones it can copy; the others go to the codec.
func TestRawScanner(t *testing.T) {
	copied := map[string]bool{rawSeeds[0]: true, rawSeeds[1]: true, rawSeeds[2]: true, rawSeeds[3]: true,
		"\"\x7f\"": true, `[[[[[[[[[[]]]]]]]]]]`: true}
	for _, raw := range rawSeeds {
		_, ok := appendRaw(nil, json.RawMessage(raw))
		if ok != copied[raw] {
			t.Errorf("%s: copied %v, want %v", raw, ok, copied[raw])
		}
	}
	deep := strings.Repeat("[", maxRawDepth+1) + strings.Repeat("]", maxRawDepth+1)
	if _, ok := appendRaw(nil, json.RawMessage(deep)); ok {
		t.Error("nesting deeper than maxRawDepth copied")
	}
}

// TestSafePrefix: the words safePrefix skips hold only bytes a JSON string
// keeps, and it skips every word of such bytes.
func TestSafePrefix(t *testing.T) {
	for c := range 256 {
		for pos := range 8 {
			b := []byte("abcdefghABCDEFGH")
			b[pos+8] = byte(c)
			want := 16
			if c >= 0x80 || !safeASCII[c] {
				want = 8
			}
			if got := safePrefix(b); got != want {
				t.Fatalf("byte %#x at %d: %d, want %d", c, pos+8, got, want)
			}
			if got := safePrefix(string(b)); got != want {
				t.Fatalf("string, byte %#x at %d: %d, want %d", c, pos+8, got, want)
			}
		}
	}
}

// TestFastEncoderSeesEveryField fills every field of every payload type
// the fast encoder knows, nested ones too, and compares its bytes with the
// codec's: a field added to one of these types later fails here until the
// fast encoder writes it, instead of being dropped from every session file.
func TestFastEncoderSeesEveryField(t *testing.T) {
	for _, d := range []any{TurnStart{}, Step{}, TurnEnd{}, AssistantChunk{}, AssistantMessage{}, content.Message{},
		ToolCall{}, ToolResult{}, RequestHeader{}, InboxSpliced{}, EndSeed{}} {
		v := reflect.New(reflect.TypeOf(d)).Elem()
		fillEveryField(v, 0)
		full := v.Interface()
		if _, ok := appendData(nil, full); !ok {
			t.Fatalf("%T: not a fast payload any more; take it out of this list", d)
		}
		e := Event{Seq: 3, Time: 4, Type: TypeToolResult, Data: full}
		got, gotErr := e.AppendJSON(nil)
		want, wantErr := appendJSONByCodec(e, nil)
		if gotErr != nil || wantErr != nil || !bytes.Equal(got, want) {
			t.Fatalf("%T with every field set: fast encoder\n%s (%v)\ncodec\n%s (%v)", d, got, gotErr, want, wantErr)
		}
	}
}

// fillEveryField sets every exported field reachable from v to a value
// that is not its zero, down to a few levels of nesting.
func fillEveryField(v reflect.Value, depth int) {
	if depth > 4 {
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(depth + 2))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(depth + 2))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillEveryField(v.Elem(), depth+1)
	case reflect.Slice:
		if v.Type() == reflect.TypeOf(json.RawMessage(nil)) {
			v.SetBytes([]byte(`{"k":1}`))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillEveryField(v.Index(0), depth+1)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillEveryField(k, depth+1)
		fillEveryField(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillEveryField(v.Field(i), depth+1)
			}
		}
	}
}
