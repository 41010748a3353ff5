package decode

import (
	"github.com/listwatch/listwatch/apiserver/internal/respond"
	"github.com/listwatch/listwatch/storage"
)

// MaxDepth bounds how deeply a document the server applies or stores may
// nest its objects and arrays: a patch, an apply configuration, and a
// custom resource as it is created, updated or left by a patch.
//
// Kubernetes' own decoders stop at 10,000 levels (encoding/json and
// sigs.k8s.io/json's scanners, apimachinery's JSON number conversion, the
// YAML parser, structured-merge-diff's value conversion), and
// kube-apiserver v1.37 stores a custom resource that preserves unknown
// fields at any depth below that. It pays for it: the field manager's
// cost grows faster than the depth (a 5,000-level re-apply takes 4.2 s
// and 1.2 GB there), and a merge patch's cost grows with its square.
// Bodies deeper than MaxDepth are refused before any of that work, with a
// 400 naming the depth and the bound; those deeper than 10,000 levels get
// kube's own answers, from the same decoders. The deepest
// CustomResourceDefinition among those Kubernetes' own repositories ship
// (Gateway API's) nests 24 levels, its schema included; no built-in
// object comes near.
const MaxDepth = 100

// Depth is how deeply the JSON document b nests its objects and arrays,
// in one pass without decoding it; b is valid JSON.
func Depth(b []byte) int {
	depth, deepest := 0, 0
	scan(b, func(c byte, inString bool) {
		switch {
		case inString:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	})
	return deepest
}

// scan calls f with each byte of the JSON document b and whether it is
// part of a string, its quotes included.
func scan(b []byte, f func(c byte, inString bool)) {
	inString, escaped := false, false
	for _, c := range b {
		in := inString
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString, in = true, true
		}
		f(c, in)
	}
}

// ObjectDepth is how deeply obj, a decoded object, nests its maps and
// slices, as Depth counts them in its JSON (obj itself is level 1), its
// metadata.managedFields left out: the field manager writes there a tree
// as deep as the object's deepest field plus the entry around it, and an
// object at the bound stays writable as the server returned it.
func ObjectDepth(obj map[string]any) int {
	deepest := 0
	for k, v := range obj {
		if md, ok := v.(map[string]any); ok && k == "metadata" {
			for mk, mv := range md {
				if mk != "managedFields" {
					deepest = max(deepest, 1+levels(mv))
				}
			}
			deepest = max(deepest, 1)
			continue
		}
		deepest = max(deepest, levels(v))
	}
	return 1 + deepest
}

// levels is how many maps and slices nest in v, v included.
func levels(v any) int {
	deepest := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			deepest = max(deepest, levels(e))
		}
	case []any:
		for _, e := range v {
			deepest = max(deepest, levels(e))
		}
	default:
		return 0
	}
	return 1 + deepest
}

// TooDeep is the 400 refusing a document of what ("the patch", "the
// object") nested depth levels deep, deeper than MaxDepth.
func TooDeep(what string, depth int) error {
	return respond.BadRequest("%s is nested %d levels deep, more than the %d this server accepts", what, depth, MaxDepth)
}

// CompactSize is how many bytes the JSON document b takes without the
// whitespace between its tokens; b is valid JSON.
func CompactSize(b []byte) int {
	n := 0
	scan(b, func(c byte, inString bool) {
		if inString || (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			n++
		}
	})
	return n
}

// CheckStorable refuses, with the 413 the storage would answer, a custom
// resource's JSON document b that cannot be stored whatever becomes of
// it: a custom resource is stored as JSON, and nothing a write does to one
// makes it smaller than its compact form, but for what a write drops (a
// status on create, fields the schema prunes, escapes written out), which
// kube-apiserver would store if what remained fit. Refused before it is
// decoded, such a body costs nothing; decoded, a 3 MiB body held the
// server for seconds to minutes and 0.4 to 1.4 GB of allocations before
// the storage refused it.
func CheckStorable(b []byte) error {
	if len(b) > storage.MaxValueBytes && CompactSize(b) > storage.MaxValueBytes {
		return respond.ObjectTooLarge()
	}
	return nil
}
