package golden

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// maxDiffLines bounds the differences Diff lists for one step.
const maxDiffLines = 40

// Diff compares a golden answer (want) with a replayed one (got), both
// masked, and returns one line per difference: the status code, then each
// differing path of the body, e.g.
//
//	status code: want 422, got 201
//	details.causes[0].field: want "spec.containers", got <absent>
//
// Warnings are not compared. An empty result means the answers match.
func Diff(want, got Response) []string {
	var lines []string
	if want.Code != got.Code {
		lines = append(lines, fmt.Sprintf("status code: want %d, got %d", want.Code, got.Code))
	}
	if want.Text != got.Text {
		lines = append(lines, fmt.Sprintf("text: want %s, got %s", quote(want.Text), quote(got.Text)))
	}
	got.Body = DropUnrecordedManagedFields(want.Body, got.Body)
	wk, gk := kindOf(want.Body), kindOf(got.Body)
	if wk != gk && wk != "" && gk != "" {
		// A Status for an object, or one kind for another: a field by
		// field comparison would only list every field.
		lines = append(lines, fmt.Sprintf("kind: want %s, got %s", wk, gk))
	} else {
		diffValue(&lines, "", want.Body, got.Body)
	}
	if len(lines) > maxDiffLines {
		n := len(lines) - maxDiffLines
		lines = append(lines[:maxDiffLines], fmt.Sprintf("… and %d more", n))
	}
	return lines
}

// DiffWarnings compares the Warning headers of a golden answer (want)
// and a replayed one (got), for the steps that ask for it.
func DiffWarnings(want, got []string) []string {
	if slices.Equal(want, got) {
		return nil
	}
	return []string{fmt.Sprintf("warnings: want %q, got %q", want, got)}
}

// kindOf returns the kind of a JSON object, "" for anything else.
func kindOf(v any) string {
	m, _ := v.(map[string]any)
	k, _ := m["kind"].(string)
	return k
}

func quote(s string) string {
	if s == "" {
		return "<none>"
	}
	return strconv.Quote(truncate(s, 400))
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func join(path, key string) string {
	if !identifier.MatchString(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func diffValue(lines *[]string, path string, want, got any) {
	if reflect.DeepEqual(want, got) {
		return
	}
	wm, wIsMap := want.(map[string]any)
	gm, gIsMap := got.(map[string]any)
	if wIsMap && gIsMap {
		keys := map[string]bool{}
		for k := range wm {
			keys[k] = true
		}
		for k := range gm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			w, inW := wm[k]
			g, inG := gm[k]
			p := join(path, k)
			switch {
			case !inW:
				*lines = append(*lines, fmt.Sprintf("%s: want <absent>, got %s", p, render(g)))
			case !inG:
				*lines = append(*lines, fmt.Sprintf("%s: want %s, got <absent>", p, render(w)))
			default:
				diffValue(lines, p, w, g)
			}
		}
		return
	}
	wl, wIsList := want.([]any)
	gl, gIsList := got.([]any)
	if wIsList && gIsList {
		if key := alignKey(wl, gl); key != "" {
			diffKeyed(lines, path, key, wl, gl)
			return
		}
		n := max(len(wl), len(gl))
		for i := range n {
			p := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case i >= len(wl):
				*lines = append(*lines, fmt.Sprintf("%s: want <absent>, got %s", p, render(gl[i])))
			case i >= len(gl):
				*lines = append(*lines, fmt.Sprintf("%s: want %s, got <absent>", p, render(wl[i])))
			default:
				diffValue(lines, p, wl[i], gl[i])
			}
		}
		return
	}
	if path == "" {
		path = "body"
	}
	*lines = append(*lines, fmt.Sprintf("%s: want %s, got %s", path, render(want), render(got)))
}

// alignKey returns the field by which two lists of objects are best
// compared element by element: "name" or "type" when every element of
// both is an object with a distinct string value there (containers, ports,
// conditions), "" when the lists are compared by index.
func alignKey(a, b []any) string {
	for _, key := range []string{"name", "type"} {
		if uniqueKeys(a, key) && uniqueKeys(b, key) {
			return key
		}
	}
	return ""
}

func uniqueKeys(l []any, key string) bool {
	if len(l) == 0 {
		return false
	}
	seen := map[string]bool{}
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			return false
		}
		k, ok := m[key].(string)
		if !ok || seen[k] {
			return false
		}
		seen[k] = true
	}
	return true
}

// diffKeyed compares two lists of objects by their key field, e.g.
// spec.containers[name=main].image; a difference only in order is one line.
func diffKeyed(lines *[]string, path, key string, want, got []any) {
	index := func(l []any) (map[string]any, []string) {
		m := map[string]any{}
		var order []string
		for _, e := range l {
			k := e.(map[string]any)[key].(string)
			m[k] = e
			order = append(order, k)
		}
		return m, order
	}
	wm, wOrder := index(want)
	gm, gOrder := index(got)
	before := len(*lines)
	for _, k := range wOrder {
		p := fmt.Sprintf("%s[%s=%s]", path, key, k)
		if g, ok := gm[k]; ok {
			diffValue(lines, p, wm[k], g)
		} else {
			*lines = append(*lines, fmt.Sprintf("%s: want %s, got <absent>", p, render(wm[k])))
		}
	}
	for _, k := range gOrder {
		if _, ok := wm[k]; !ok {
			*lines = append(*lines, fmt.Sprintf("%s[%s=%s]: want <absent>, got %s", path, key, k, render(gm[k])))
		}
	}
	if len(*lines) == before {
		*lines = append(*lines, fmt.Sprintf("%s: order differs: want %s, got %s", path, render(wOrder), render(gOrder)))
	}
}

// render shows a value as compact JSON, cut at a few hundred bytes.
func render(v any) string {
	if v == nil {
		return "null"
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("%v", v)
	}
	return truncate(strings.TrimSuffix(b.String(), "\n"), 400)
}

// Summary is a one-line account of a Status answer or an object, to head
// a step's diff: "422 Invalid: ConfigMap "x" is invalid: …" or "201
// ConfigMap".
func Summary(r Response) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d", r.Code)
	obj, _ := r.Body.(map[string]any)
	switch {
	case obj == nil && r.Text != "":
		fmt.Fprintf(&b, " %s", truncate(r.Text, 200))
	case obj["kind"] == "Status":
		if reason, ok := obj["reason"].(string); ok && reason != "" {
			fmt.Fprintf(&b, " %s", reason)
		}
		if msg, ok := obj["message"].(string); ok {
			fmt.Fprintf(&b, ": %s", truncate(msg, 300))
		}
	case obj != nil:
		if kind, ok := obj["kind"].(string); ok {
			fmt.Fprintf(&b, " %s", kind)
		}
	}
	return b.String()
}
