package jsontree

import "slices"

// A Picker reads the values at a few paths of a JSON object without
// building the rest of its tree: what a watch cache needs of each object
// version written (its labels and selectable fields) is a handful of
// values, and DecodeObject's whole tree of a stored pod was a twentieth of
// a pod create's CPU in the API server (hack/create-throughput.sh's
// profile, issue 41). BenchmarkPick, a typical stored pod's labels and
// pod fields: 3.0× faster than DecodeObject and a lookup of each path,
// with 30 allocations instead of 178.
//
// A Picker is safe for concurrent use.
type Picker struct {
	root  *pickNode
	paths int
}

// pickNode is one key of the paths: the indexes of the paths it ends
// (several when a path is given more than once), the keys below it, and
// the indexes of every path through it.
type pickNode struct {
	ends     []int
	children map[string]*pickNode
	below    []int // the paths ending at or under this node
}

// set sets the paths ending at n to v.
func (n *pickNode) set(dst []any, v any) {
	for _, i := range n.ends {
		dst[i] = v
	}
}

// NewPicker returns a Picker of paths, each a list of object keys from the
// top (an empty path is the whole object).
func NewPicker(paths ...[]string) *Picker {
	p := &Picker{root: &pickNode{}, paths: len(paths)}
	for i, path := range paths {
		n := p.root
		n.below = append(n.below, i)
		for _, k := range path {
			child := n.children[k]
			if child == nil {
				child = &pickNode{}
				if n.children == nil {
					n.children = map[string]*pickNode{}
				}
				n.children[k] = child
			}
			n = child
			n.below = append(n.below, i)
		}
		n.ends = append(n.ends, i)
	}
	return p
}

// Pick checks data as DecodeObject does, failing on the same documents,
// and returns in dst (grown as needed) the value of each of p's paths in
// the order NewPicker was given them: what unstructured.NestedFieldNoCopy
// finds at it in DecodeObject's result, decoded as DecodeObject decodes
// it, or nil where it finds nothing (so nil is both JSON's null and
// nothing). A key that repeats in an object has its last value, as in
// DecodeObject's maps.
func (p *Picker) Pick(data []byte, dst []any) ([]any, error) {
	dst = slices.Grow(dst[:0], p.paths)[:p.paths]
	clear(dst)
	d := decoder{data: data}
	err := d.document(func() error { return d.pick(p.root, dst) })
	return dst, err
}

// pick reads the value at d.pos, which n's paths go through: decoded
// whole where a path ends at n, else, for an object, only the keys on
// n's paths, the others checked and skipped.
func (d *decoder) pick(n *pickNode, dst []any) error {
	if len(n.ends) > 0 {
		v, err := d.value()
		if err != nil {
			return err
		}
		fillFrom(n, v, true, dst)
		return nil
	}
	if d.pos >= len(d.data) || d.data[d.pos] != '{' {
		// Not an object: nothing under it is found.
		return d.skip()
	}
	return d.members(d.key, func(k string) error {
		child := n.children[k]
		if child == nil {
			return d.skip()
		}
		// A repeated key's last value wins: what an earlier one gave
		// is forgotten.
		for _, i := range child.below {
			dst[i] = nil
		}
		return d.pick(child, dst)
	})
}

// fillFrom sets the paths at and under n from v, the value decoded there
// (found false: none).
func fillFrom(n *pickNode, v any, found bool, dst []any) {
	if !found {
		return
	}
	n.set(dst, v)
	m, ok := v.(map[string]any)
	for k, child := range n.children {
		var cv any
		var cok bool
		if ok {
			cv, cok = m[k]
		}
		fillFrom(child, cv, cok, dst)
	}
}

// skip checks the value at d.pos as value would decode it, without
// building objects, arrays or strings (numbers and literals cost value
// nothing to decode).
func (d *decoder) skip() error {
	if d.pos >= len(d.data) {
		return d.errorf("unexpected end of JSON input")
	}
	switch d.data[d.pos] {
	case '{':
		return d.members(d.skipKey, func(string) error { return d.skip() })
	case '[':
		return d.elements(d.skip)
	case '"':
		return d.skipString()
	default:
		_, err := d.value()
		return err
	}
}

// skipKey checks an object key as key would read it.
func (d *decoder) skipKey() (string, error) { return "", d.skipString() }

// skipString checks the string at d.pos as string would decode it.
func (d *decoder) skipString() error {
	d.pos++ // "
	for d.pos < len(d.data) {
		switch c := d.data[d.pos]; {
		case c == '"':
			d.pos++
			return nil
		case c == '\\':
			if _, err := d.escape(); err != nil {
				return err
			}
		case c < ' ':
			return d.errorf("invalid character %q in string literal", c)
		default:
			d.pos++
		}
	}
	return d.errorf("unexpected end of JSON input")
}
