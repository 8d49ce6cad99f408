package broker

// Reflection over kmsg's generated request and response structs, so that the authorization rules
// (authorize.go) need one line per API rather than a hand-written walk per API. kmsg names fields
// consistently: a topic list "Topics" whose elements carry "Topic" (string or *string) and/or
// "TopicID", partitions "Partitions" as []int32 or elements with "Partition"/"PartitionIndex", and
// "ErrorCode" where an answer carries one. Group lists are "Groups" or "GroupIDs" of strings, or of
// elements with "Group"/"GroupID".

import (
	"bytes"
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// field returns v's named field (v a struct or pointer to one), or an invalid Value.
func field(v reflect.Value, name string) reflect.Value {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v.FieldByName(name)
}

// stringOf reads a string or *string field ("" for nil or absent).
func stringOf(v reflect.Value) (string, bool) {
	switch {
	case !v.IsValid():
		return "", false
	case v.Kind() == reflect.String:
		return v.String(), true
	case v.Kind() == reflect.Pointer && v.Type().Elem().Kind() == reflect.String:
		if v.IsNil() {
			return "", true
		}
		return v.Elem().String(), true
	}
	return "", false
}

// setString sets a string or *string field.
func setString(v reflect.Value, s string) {
	switch {
	case !v.IsValid():
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Pointer && v.Type().Elem().Kind() == reflect.String:
		v.Set(reflect.ValueOf(&s))
	}
}

func setInt(v reflect.Value, n int64) {
	if v.IsValid() && v.CanInt() {
		v.SetInt(n)
	}
}

// newElement makes a slice element of type t with kmsg's defaults.
func newElement(t reflect.Type) reflect.Value {
	ptr := reflect.New(t)
	if d := ptr.MethodByName("Default"); d.IsValid() {
		d.Call(nil)
	}
	return ptr.Elem()
}

// requestTopic is one topic named in a request.
type requestTopic struct {
	name       string
	id         [16]byte
	partitions []int32
}

// topicsOf reads a request's "Topics" list; resolve names topics given by id only.
func topicsOf(req any, resolve func([16]byte) string) ([]requestTopic, bool) {
	list := field(reflect.ValueOf(req), "Topics")
	if !list.IsValid() || list.Kind() != reflect.Slice || list.Type().Elem().Kind() != reflect.Struct {
		return nil, false
	}
	out := make([]requestTopic, list.Len())
	for i := range list.Len() {
		element := list.Index(i)
		name, _ := stringOf(element.FieldByName("Topic"))
		if id := element.FieldByName("TopicID"); id.IsValid() && id.Type() == reflect.TypeFor[[16]byte]() {
			out[i].id = id.Interface().([16]byte)
			if name == "" && out[i].id != ([16]byte{}) {
				name = resolve(out[i].id)
			}
		}
		out[i].name = name
		if partitions := element.FieldByName("Partitions"); partitions.IsValid() && partitions.Kind() == reflect.Slice {
			for j := range partitions.Len() {
				p := partitions.Index(j)
				switch {
				case p.Kind() == reflect.Int32:
					out[i].partitions = append(out[i].partitions, int32(p.Int()))
				case p.Kind() == reflect.Struct && p.FieldByName("Partition").IsValid():
					out[i].partitions = append(out[i].partitions, int32(p.FieldByName("Partition").Int()))
				case p.Kind() == reflect.Struct && p.FieldByName("PartitionIndex").IsValid():
					out[i].partitions = append(out[i].partitions, int32(p.FieldByName("PartitionIndex").Int()))
				}
			}
		}
	}
	return out, true
}

// keepTopics keeps the request's "Topics" elements whose index keep allows.
func keepTopics(req any, keep []bool) {
	list := field(reflect.ValueOf(req), "Topics")
	kept := reflect.MakeSlice(list.Type(), 0, list.Len())
	for i := range list.Len() {
		if keep[i] {
			kept = reflect.Append(kept, list.Index(i))
		}
	}
	list.Set(kept)
}

// appendTopicErrors adds topics to the response's "Topics" list, each answering code: per
// partition where the response has partitions, else per topic.
func appendTopicErrors(resp kmsg.Response, topics []requestTopic, code int16) {
	list := field(reflect.ValueOf(resp), "Topics")
	if !list.IsValid() || list.Kind() != reflect.Slice || list.Type().Elem().Kind() != reflect.Struct {
		return
	}
	for _, t := range topics {
		element := newElement(list.Type().Elem())
		setString(element.FieldByName("Topic"), t.name)
		if id := element.FieldByName("TopicID"); id.IsValid() && id.Type() == reflect.TypeFor[[16]byte]() {
			id.Set(reflect.ValueOf(t.id))
		}
		setInt(element.FieldByName("ErrorCode"), int64(code))
		if partitions := element.FieldByName("Partitions"); partitions.IsValid() && partitions.Kind() == reflect.Slice &&
			partitions.Type().Elem().Kind() == reflect.Struct {
			for _, p := range t.partitions {
				pe := newElement(partitions.Type().Elem())
				setInt(pe.FieldByName("Partition"), int64(p))
				setInt(pe.FieldByName("PartitionIndex"), int64(p))
				setInt(pe.FieldByName("ErrorCode"), int64(code))
				partitions.Set(reflect.Append(partitions, pe))
			}
		}
		list.Set(reflect.Append(list, element))
	}
}

// groupListField finds a request's or response's group list.
func groupListField(v any) reflect.Value {
	for _, name := range []string{"Groups", "GroupIDs"} {
		if list := field(reflect.ValueOf(v), name); list.IsValid() && list.Kind() == reflect.Slice {
			return list
		}
	}
	return reflect.Value{}
}

func groupNameOf(element reflect.Value) string {
	if element.Kind() == reflect.String {
		return element.String()
	}
	for _, name := range []string{"Group", "GroupID"} {
		if s, ok := stringOf(element.FieldByName(name)); ok {
			return s
		}
	}
	return ""
}

// groupOf reads a request's single group ("Group" or "GroupID"); ok is false when it has none.
func groupOf(req any) (string, bool) {
	for _, name := range []string{"Group", "GroupID"} {
		if s, ok := stringOf(field(reflect.ValueOf(req), name)); ok {
			return s, true
		}
	}
	return "", false
}

// transactionalIDOf reads a request's "TransactionalID" (empty for none or null).
func transactionalIDOf(req any) string {
	s, _ := stringOf(field(reflect.ValueOf(req), "TransactionalID"))
	return s
}

// setTopLevelError sets the response's top-level ErrorCode if the request's version encodes it,
// and reports whether it did.
func setTopLevelError(resp kmsg.Response, version int16, code int16) bool {
	errorCode := field(reflect.ValueOf(resp), "ErrorCode")
	if !errorCode.IsValid() || errorCode.Kind() != reflect.Int16 {
		return false
	}
	resp.SetVersion(version)
	without := resp.AppendTo(nil)
	errorCode.SetInt(int64(code))
	return !bytes.Equal(without, resp.AppendTo(nil))
}
