package otlp

import (
	"encoding/binary"
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The OTLP trace messages (opentelemetry/proto/collector/trace/v1 and
// trace/v1) written field by field in the protobuf wire format: the
// generated packages, and the gRPC stack they import, would cost every dsh
// process a few milliseconds of start-up whether it traces or not.

// pb is a protobuf message being written.
type pb []byte

const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

func (b pb) tag(field, wire int) pb { return binary.AppendUvarint(b, uint64(field)<<3|uint64(wire)) }

func (b pb) varint(field int, v uint64) pb {
	if v == 0 {
		return b
	}
	return binary.AppendUvarint(b.tag(field, wireVarint), v)
}

func (b pb) fixed64(field int, v uint64) pb {
	return binary.LittleEndian.AppendUint64(b.tag(field, wireFixed64), v)
}

func (b pb) fixed32(field int, v uint32) pb {
	return binary.LittleEndian.AppendUint32(b.tag(field, wireFixed32), v)
}

func (b pb) bytes(field int, v []byte) pb {
	if len(v) == 0 {
		return b
	}
	return append(binary.AppendUvarint(b.tag(field, wireBytes), uint64(len(v))), v...)
}

func (b pb) string(field int, v string) pb {
	if v == "" {
		return b
	}
	return append(binary.AppendUvarint(b.tag(field, wireBytes), uint64(len(v))), v...)
}

// message writes a nested message, present even when empty.
func (b pb) message(field int, m pb) pb {
	return append(binary.AppendUvarint(b.tag(field, wireBytes), uint64(len(m))), m...)
}

// encodeRequest writes an ExportTraceServiceRequest for spans, grouped by
// resource and instrumentation scope.
func encodeRequest(spans []sdktrace.ReadOnlySpan) []byte {
	type group struct {
		res    *resource.Resource
		scopes []instrumentation.Scope
		spans  map[instrumentation.Scope][]sdktrace.ReadOnlySpan
	}
	var groups []*group
	for _, s := range spans {
		var g *group
		for _, x := range groups {
			if x.res == s.Resource() || (x.res != nil && s.Resource() != nil && x.res.Equivalent() == s.Resource().Equivalent()) {
				g = x
			}
		}
		if g == nil {
			g = &group{res: s.Resource(), spans: map[instrumentation.Scope][]sdktrace.ReadOnlySpan{}}
			groups = append(groups, g)
		}
		sc := s.InstrumentationScope()
		if _, ok := g.spans[sc]; !ok {
			g.scopes = append(g.scopes, sc)
		}
		g.spans[sc] = append(g.spans[sc], s)
	}
	var req pb
	for _, g := range groups {
		var rs pb
		var res pb
		if g.res != nil {
			for _, kv := range g.res.Attributes() {
				res = res.message(1, keyValue(kv))
			}
		}
		rs = rs.message(1, res)
		for _, sc := range g.scopes {
			var ss pb
			ss = ss.message(1, pb(nil).string(1, sc.Name).string(2, sc.Version))
			for _, s := range g.spans[sc] {
				ss = ss.message(2, span(s))
			}
			ss = ss.string(3, sc.SchemaURL)
			rs = rs.message(2, ss)
		}
		if g.res != nil {
			rs = rs.string(3, g.res.SchemaURL())
		}
		req = req.message(1, rs)
	}
	return req
}

// span writes a Span.
func span(s sdktrace.ReadOnlySpan) pb {
	sc, parent := s.SpanContext(), s.Parent()
	tid, sid := sc.TraceID(), sc.SpanID()
	var b pb
	b = b.bytes(1, tid[:]).bytes(2, sid[:]).string(3, sc.TraceState().String())
	if parent.SpanID().IsValid() {
		psid := parent.SpanID()
		b = b.bytes(4, psid[:])
	}
	b = b.string(5, s.Name()).varint(6, uint64(s.SpanKind()))
	b = b.fixed64(7, uint64(s.StartTime().UnixNano())).fixed64(8, uint64(s.EndTime().UnixNano()))
	for _, kv := range s.Attributes() {
		b = b.message(9, keyValue(kv))
	}
	b = b.varint(10, uint64(s.DroppedAttributes()))
	for _, e := range s.Events() {
		ev := pb(nil).fixed64(1, uint64(e.Time.UnixNano())).string(2, e.Name)
		for _, kv := range e.Attributes {
			ev = ev.message(3, keyValue(kv))
		}
		b = b.message(11, ev.varint(4, uint64(e.DroppedAttributeCount)))
	}
	b = b.varint(12, uint64(s.DroppedEvents()))
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		lk := pb(nil).bytes(1, ltid[:]).bytes(2, lsid[:]).string(3, l.SpanContext.TraceState().String())
		for _, kv := range l.Attributes {
			lk = lk.message(4, keyValue(kv))
		}
		b = b.message(13, lk.varint(5, uint64(l.DroppedAttributeCount)).fixed32(6, flags(l.SpanContext.TraceFlags(), l.SpanContext.IsRemote())))
	}
	b = b.varint(14, uint64(s.DroppedLinks()))
	st := s.Status()
	code := uint64(0) // UNSET
	switch st.Code {
	case codes.Ok:
		code = 1
	case codes.Error:
		code = 2
	}
	b = b.message(15, pb(nil).string(2, st.Description).varint(3, code))
	return b.fixed32(16, flags(sc.TraceFlags(), parent.IsRemote()))
}

// flags writes a span's W3C trace flags and whether its parent is remote,
// as SpanFlags does.
func flags(tf interface{ IsSampled() bool }, remote bool) uint32 {
	f := uint32(0x100) // SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
	if tf.IsSampled() {
		f |= 1
	}
	if remote {
		f |= 0x200
	}
	return f
}

// keyValue writes a KeyValue.
func keyValue(kv attribute.KeyValue) pb {
	return pb(nil).string(1, string(kv.Key)).message(2, anyValue(kv.Value))
}

// anyValue writes an AnyValue.
func anyValue(v attribute.Value) pb {
	var b pb
	switch v.Type() {
	case attribute.BOOL:
		b = b.tag(2, wireVarint)
		if v.AsBool() {
			return append(b, 1)
		}
		return append(b, 0)
	case attribute.INT64:
		return binary.AppendUvarint(b.tag(3, wireVarint), uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return b.fixed64(4, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		return append(binary.AppendUvarint(b.tag(1, wireBytes), uint64(len(v.AsString()))), v.AsString()...)
	case attribute.BYTESLICE:
		return append(binary.AppendUvarint(b.tag(7, wireBytes), uint64(len(v.AsByteSlice()))), v.AsByteSlice()...)
	case attribute.BOOLSLICE:
		return array(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return array(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return array(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return array(v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return array(v.AsSlice(), func(x attribute.Value) attribute.Value { return x })
	}
	return b // empty
}

// array writes an ArrayValue of vs.
func array[T any](vs []T, value func(T) attribute.Value) pb {
	var arr pb
	for _, x := range vs {
		arr = arr.message(1, anyValue(value(x)))
	}
	return pb(nil).message(5, arr)
}
