package session

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// codec is how payloads are encoded: the encoding/json/v2 engine (its
// upstream mirror until Go 1.27 ships it) with encoding/json's semantics, so
// the files stay what encoding/json reads and writes, at a fraction of the
// cost.
var codec = jsonv1.DefaultOptionsV1()

// MarshalJSON writes the event envelope {type, seq, time, data, …}.
func (e Event) MarshalJSON() ([]byte, error) { return e.AppendJSON(nil) }

// AppendJSON appends the event's JSON envelope to buf. The payloads of the
// core types are encoded without reflection (fastjson.go), the others
// through the codec; the bytes are encoding/json's either way.
func (e Event) AppendJSON(buf []byte) ([]byte, error) {
	start := len(buf)
	buf = append(buf, `{"type":`...)
	buf = appendPayloadString(buf, e.Type)
	buf = append(buf, `,"seq":`...)
	buf = strconv.AppendInt(buf, e.Seq, 10)
	buf = append(buf, `,"time":`...)
	buf = strconv.AppendInt(buf, e.Time, 10)
	buf = append(buf, `,"data":`...)
	var ok bool
	if buf, ok = appendData(buf, e.Data); !ok {
		data, err := jsonv2.Marshal(e.Data, codec)
		if err != nil {
			return buf[:start], fmt.Errorf("session: event %d (%s): %w", e.Seq, e.Type, err)
		}
		buf = append(buf, data...)
	}
	if e.Ignorable {
		buf = append(buf, `,"ignorable":true`...)
	}
	if isSurface(e.Type) {
		buf = append(buf, `,"surfaceOp":"append"`...)
	}
	if e.SourceEventSeqs != nil {
		buf = append(buf, `,"sourceEventSeqs":[`...)
		for i, s := range e.SourceEventSeqs {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = strconv.AppendInt(buf, s, 10)
		}
		buf = append(buf, ']')
	}
	return append(buf, '}'), nil
}

// UnmarshalJSON reads an event envelope, decoding the payload of known types.
// An unknown type that is not marked ignorable is refused.
func (e *Event) UnmarshalJSON(b []byte) error {
	ev, err := new(Decoder).Decode(b)
	if err == nil {
		*e = ev
	}
	return err
}

// Decoder decodes event envelopes in one pass, reusing its buffers across
// calls: a loader keeps one for a whole file. It is not safe for concurrent
// use.
type Decoder struct {
	dec *jsontext.Decoder
	r   byteReader
}

// Decode reads one event envelope, decoding the payload of known types. An
// unknown type that is not marked ignorable is refused.
func (d *Decoder) Decode(b []byte) (Event, error) {
	d.r.b = b
	if d.dec == nil {
		d.dec = jsontext.NewDecoder(&d.r)
	} else {
		d.dec.Reset(&d.r)
	}
	dec := d.dec
	var (
		out     Event
		op      string // surfaceOp, checked once the type is known
		known   bool
		raw     []byte // the payload, kept only when it precedes the type
		decoded bool
	)
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return Event{}, errors.New("event is not a JSON object")
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadValue() // a quoted name, valid until the next read
		if err != nil {
			return Event{}, err
		}
		var field string // named for errors without allocating
		switch string(name) {
		case `"type"`:
			field = "type"
			err = jsonv2.UnmarshalDecode(dec, &out.Type, codec)
		case `"seq"`:
			field = "seq"
			err = jsonv2.UnmarshalDecode(dec, &out.Seq, codec)
		case `"time"`:
			field = "time"
			err = jsonv2.UnmarshalDecode(dec, &out.Time, codec)
		case `"data"`:
			field = "data"
			if out.Type == "" { // unusual order: keep the value until the type is known
				var v jsontext.Value
				if v, err = dec.ReadValue(); err == nil {
					raw = append([]byte(nil), v...)
				}
				break
			}
			out.Data, known, err = decodeFrom(out.Type, dec)
			decoded = true
		case `"ignorable"`:
			field = "ignorable"
			err = jsonv2.UnmarshalDecode(dec, &out.Ignorable, codec)
		case `"surfaceOp"`:
			field = "surfaceOp"
			err = jsonv2.UnmarshalDecode(dec, &op, codec)
		case `"sourceEventSeqs"`:
			field = "sourceEventSeqs"
			err = jsonv2.UnmarshalDecode(dec, &out.SourceEventSeqs, codec)
		default:
			field = "unknown"
			err = dec.SkipValue()
		}
		if err != nil {
			return Event{}, fmt.Errorf("event %q, field %s: %w", out.Type, field, err)
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return Event{}, err
	}
	if dec.PeekKind() != 0 {
		return Event{}, errors.New("trailing data after the event")
	}
	if out.Type == "" {
		return Event{}, errors.New("event has no type")
	}
	if op != "" && op != out.SurfaceOp() {
		return Event{}, &Error{Code: CodeFormat, Msg: fmt.Sprintf("event %q: unsupported surfaceOp %q", out.Type, op)}
	}
	if !decoded {
		var err error
		if out.Data, known, err = decodeData(out.Type, raw); err != nil {
			return Event{}, fmt.Errorf("event %q: %w", out.Type, err)
		}
	}
	if !known && !out.Ignorable {
		return Event{}, &Error{Code: CodeUnknownEvent, Msg: fmt.Sprintf("unknown required event type %q", out.Type)}
	}
	return out, nil
}

// byteReader reads a byte slice without copying it up front.
type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}
