package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/listwatch/listwatch/internal/benchpods"
)

// stream is a watch stream as kube-apiserver writes one, with what makes a
// scanner stumble: escaped quotes and backslashes, arrays of objects,
// numbers and literals, the annotation's name elsewhere, no newline
// between two events.
const stream = `{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"11",` +
	`"labels":{"watchload.listwatch.dev/update":"not/an/annotation"},"annotations":{"x":"say \"hi\" \\","watchload.listwatch.dev/update":"3/7/123"}},` +
	`"spec":{"containers":[{"name":"c","ports":[{"containerPort":8080}],"x":[1,-2.5e3,true,false,null,[],{}]}]},"status":{}}}` + "\n" +
	`{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}` +
	`  {"type" : "MODIFIED" , "object" : { "metadata" : { "annotations" : { "watchload.listwatch.dev/update" : "0/1/5" } , "resourceVersion" : "13" } } }` + "\r\n" +
	`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (13)","reason":"Expired","code":410}}` + "\n"

func TestEventDecoder(t *testing.T) {
	want := []struct{ typ, rv, stamp string }{
		{"ADDED", "11", "3/7/123"},
		{"BOOKMARK", "12", ""},
		{"MODIFIED", "13", "0/1/5"},
		{"ERROR", "", ""},
	}
	for name, r := range map[string]io.Reader{
		"whole":       strings.NewReader(stream),
		"byte a time": iotest.OneByteReader(strings.NewReader(stream)),
		"half":        iotest.HalfReader(strings.NewReader(stream)),
	} {
		t.Run(name, func(t *testing.T) {
			d := newEventDecoder(r, annotation)
			d.buf = make([]byte, 16) // grown as events need
			var ev event
			for i, w := range want {
				if err := d.next(&ev); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				if string(ev.typ) != w.typ || string(ev.rv) != w.rv || string(ev.stamp) != w.stamp {
					t.Errorf("event %d = %s %s %q; want %s %s %q", i, ev.typ, ev.rv, ev.stamp, w.typ, w.rv, w.stamp)
				}
				if !json.Valid(ev.frame) {
					t.Errorf("event %d frame %q is not one JSON value", i, ev.frame)
				}
			}
			if err := d.next(&ev); err != io.EOF {
				t.Errorf("after the last event: %v; want EOF", err)
			}
		})
	}
}

func TestEventDecoderErrors(t *testing.T) {
	for name, tt := range map[string]struct {
		in   string
		want error
	}{
		"cut":       {`{"type":"MODIFIED","object":{"metadata":{`, io.ErrUnexpectedEOF},
		"cut name":  {`{"type":"MODIF`, io.ErrUnexpectedEOF},
		"not JSON":  {`<html>`, nil},
		"bad delim": {`{"type" "x"}`, nil},
		"bad value": {`{"type":x}`, nil},
	} {
		t.Run(name, func(t *testing.T) {
			var ev event
			err := newEventDecoder(strings.NewReader(tt.in), annotation).next(&ev)
			if err == nil || err == io.EOF || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("next(%q) = %v; want %v (nil: a syntax error)", tt.in, err, tt.want)
			}
		})
	}
}

func TestParseStamp(t *testing.T) {
	if pod, seq, sent, ok := parseStamp([]byte("12/345/1700000000123456789")); !ok || pod != 12 || seq != 345 || sent != 1700000000123456789 {
		t.Errorf("parseStamp = %d %d %d %v", pod, seq, sent, ok)
	}
	for _, s := range []string{"", "1/2", "1/2/", "1/2/3/", "a/2/3", "1//3", "1/2/3x"} {
		if _, _, _, ok := parseStamp([]byte(s)); ok {
			t.Errorf("parseStamp(%q) accepted", s)
		}
	}
}

// podEvent is a MODIFIED event of a typical pod as a server stores it.
func podEvent(tb testing.TB) []byte {
	var pod map[string]any
	if err := json.Unmarshal([]byte(benchpods.Pod(7)), &pod); err != nil {
		tb.Fatal(err)
	}
	var status map[string]any
	if err := json.Unmarshal([]byte(benchpods.StatusPatch(7)), &status); err != nil {
		tb.Fatal(err)
	}
	pod["status"] = status["status"]
	md := pod["metadata"].(map[string]any)
	md["resourceVersion"] = "123456"
	md["annotations"].(map[string]any)[annotation] = "7/42/1700000000123456789"
	b, err := json.Marshal(map[string]any{"type": "MODIFIED", "object": pod})
	if err != nil {
		tb.Fatal(err)
	}
	return append(b, '\n')
}

func TestEventDecoderPod(t *testing.T) {
	var ev event
	if err := newEventDecoder(bytes.NewReader(podEvent(t)), annotation).next(&ev); err != nil {
		t.Fatal(err)
	}
	if string(ev.typ) != "MODIFIED" || string(ev.rv) != "123456" || string(ev.stamp) != "7/42/1700000000123456789" {
		t.Errorf("got %s %s %s", ev.typ, ev.rv, ev.stamp)
	}
}

// BenchmarkEventDecoder is what a watcher spends on each event of a
// typical pod; BenchmarkEncodingJSON what encoding/json's streaming
// decoder would, decoding only the fields watchload reads.
func BenchmarkEventDecoder(b *testing.B) {
	ev1 := podEvent(b)
	stream := bytes.Repeat(ev1, 64)
	b.SetBytes(int64(len(ev1)))
	var ev event
	r := bytes.NewReader(stream)
	d := newEventDecoder(r, annotation)
	for b.Loop() {
		if err := d.next(&ev); err == io.EOF {
			r.Reset(stream)
			d = newEventDecoder(r, annotation)
		} else if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodingJSON(b *testing.B) {
	ev1 := podEvent(b)
	stream := bytes.Repeat(ev1, 64)
	b.SetBytes(int64(len(ev1)))
	var ev struct {
		Type   string
		Object struct {
			Metadata struct {
				ResourceVersion string
				Annotations     map[string]string
			}
		}
	}
	r := bytes.NewReader(stream)
	d := json.NewDecoder(r)
	for b.Loop() {
		if err := d.Decode(&ev); err == io.EOF {
			r.Reset(stream)
			d = json.NewDecoder(r)
		} else if err != nil {
			b.Fatal(err)
		}
	}
}
