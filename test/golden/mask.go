package golden

import (
	"encoding/json"
	"net/netip"
	"regexp"
	"sort"
	"strings"
)

// Placeholders that replace volatile values.
const (
	MaskUID             = "<uid>"
	MaskResourceVersion = "<resourceVersion>"
	MaskTimestamp       = "<timestamp>"
	MaskIPv4            = "<ipv4>"
	MaskIPv6            = "<ipv6>"
	MaskPort            = "<port>"
	MaskSuffix          = "<suffix>"
	MaskNamespace       = "{{ns}}"
	MaskContinue        = "<continue>"
)

var (
	uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	// The projected service-account token volume ServiceAccount admission
	// adds to pods is named kube-api-access- and five random characters.
	apiAccessVolume = regexp.MustCompile(`\bkube-api-access-[a-z0-9]{5}\b`)
	// Precondition failures quote resourceVersions, and a corrupt
	// object's error (a conversion webhook that fails) its revision.
	rvInMessage = regexp.MustCompile(`(ResourceVersion in (?:precondition|object meta): |the ResourceVersion in (?:the precondition|record) \(|object not decodable revision=)\d+`)
	// A read waiting for a watch cache that does not catch up quotes the
	// revision it waited for and the cache's.
	tooLargeInMessage = regexp.MustCompile(`(Too large resource version: )\d+(, current: )\d+`)
	// Validation messages about a patch quote the patched object as JSON,
	// escaped once or more: its resourceVersion and timestamps are masked
	// as in the object itself, and its managedFields dropped.
	embeddedRV        = regexp.MustCompile(`(\\*"resourceVersion\\*":\\*")[^"\\]+`)
	embeddedTimestamp = regexp.MustCompile(`(\\*"(?:creationTimestamp|deletionTimestamp)\\*":\\*")[^"\\]+`)
	embeddedManaged   = regexp.MustCompile(`,?\\*"managedFields\\*":\[`)
	timestamp         = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)
)

// Masker replaces the volatile parts of answers with placeholders, so
// that two servers' answers to the same steps compare equal when they
// differ only in what no client may rely on:
//
//   - metadata.uid and every other UUID, anywhere: <uid>;
//   - metadata.resourceVersion (and any resourceVersion key):
//     <resourceVersion>, and the resourceVersions precondition messages
//     quote;
//   - metadata.creationTimestamp and deletionTimestamp: <timestamp> when
//     set (presence is kept), and every RFC 3339 string under a status;
//   - metadata.managedFields: kept, each entry's time <timestamp>, the
//     entries in a fixed order (kube-apiserver orders them by time, to the
//     second, so two writes in one second or two may come in either order)
//     (goldens recorded before they were kept have none, and a replayed
//     answer's are then not compared: see DropUnrecordedManagedFields);
//   - names made from a generateName: the prefix and <suffix>;
//   - the kube-api-access-xxxxx volume of pods: kube-api-access-<suffix>;
//   - a Service's allocated clusterIP(s), nodePorts and healthCheckNodePort:
//     <ipv4>, <ipv6> or <port> (presence and format class are kept), in
//     the object and in later messages quoting them;
//   - the run's namespace name: {{ns}}, in every string.
//
// Everything else, defaulted fields included, is compared. The zero value
// is not ready; use NewMasker. A Masker is not safe for concurrent use.
type Masker struct {
	ns string
	// literals are exact strings learnt from earlier answers (generated
	// names, allocated IPs and ports) and what replaces them.
	literals map[string]string
	// exact are strings replaced wherever they occur, even inside a
	// longer word (the webhook server's host:port, which dial errors
	// follow with a colon).
	exact map[string]string
}

// NewMasker returns a masker for a run in namespace ns ("" for none: then
// only the fixed rules apply, which is how goldens are masked again).
func NewMasker(ns string) *Masker {
	return &Masker{ns: ns, literals: map[string]string{}}
}

// Learn takes note of the volatile values in an answered object that
// later answers may quote: the name made from its generateName and the
// clusterIPs and node ports of a Service. Call it with the raw object
// before masking it.
func (m *Masker) Learn(obj map[string]any) {
	if md, ok := obj["metadata"].(map[string]any); ok {
		gen, _ := md["generateName"].(string)
		name, _ := md["name"].(string)
		if gen != "" && strings.HasPrefix(name, gen) && len(name) > len(gen) {
			m.literals[name] = gen + MaskSuffix
		}
	}
	if obj["kind"] != "Service" {
		return
	}
	spec, _ := obj["spec"].(map[string]any)
	for _, ip := range serviceIPs(spec) {
		if masked := maskIP(ip); masked != ip {
			m.literals[ip] = masked
		}
	}
	for _, p := range servicePorts(spec) {
		m.literals[p] = MaskPort
	}
}

func serviceIPs(spec map[string]any) []string {
	var ips []string
	if s, ok := spec["clusterIP"].(string); ok {
		ips = append(ips, s)
	}
	if l, ok := spec["clusterIPs"].([]any); ok {
		for _, e := range l {
			if s, ok := e.(string); ok {
				ips = append(ips, s)
			}
		}
	}
	return ips
}

// servicePorts returns the allocated ports of a Service spec as decimal
// strings.
func servicePorts(spec map[string]any) []string {
	var ports []string
	add := func(v any) {
		if n, ok := v.(json.Number); ok && n.String() != "0" {
			ports = append(ports, n.String())
		}
	}
	add(spec["healthCheckNodePort"])
	if l, ok := spec["ports"].([]any); ok {
		for _, e := range l {
			if p, ok := e.(map[string]any); ok {
				add(p["nodePort"])
			}
		}
	}
	return ports
}

// maskIP returns the format class of an IP address, or s when it is none.
func maskIP(s string) string {
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return s
	case a.Is4():
		return MaskIPv4
	default:
		return MaskIPv6
	}
}

// Mask returns a masked copy of an answer.
func (m *Masker) Mask(v any) any {
	return m.walk(v, "", false)
}

// String masks the volatile parts of one string: learnt literals, the
// namespace, UUIDs, kube-api-access suffixes and quoted resourceVersions.
func (m *Masker) String(s string) string {
	if len(m.literals) > 0 {
		keys := make([]string, 0, len(m.literals))
		for k := range m.literals {
			keys = append(keys, k)
		}
		// Longest first, so that a literal inside another is not
		// replaced in the longer one's stead.
		sort.Slice(keys, func(i, j int) bool {
			if len(keys[i]) != len(keys[j]) {
				return len(keys[i]) > len(keys[j])
			}
			return keys[i] < keys[j]
		})
		for _, k := range keys {
			s = replaceWhole(s, k, m.literals[k])
		}
	}
	for k, v := range m.exact {
		s = strings.ReplaceAll(s, k, v)
	}
	if m.ns != "" {
		s = strings.ReplaceAll(s, m.ns, MaskNamespace)
	}
	s = uuidPattern.ReplaceAllString(s, MaskUID)
	s = apiAccessVolume.ReplaceAllString(s, "kube-api-access-"+MaskSuffix)
	s = rvInMessage.ReplaceAllString(s, "${1}"+MaskResourceVersion)
	s = tooLargeInMessage.ReplaceAllString(s, "${1}"+MaskResourceVersion+"${2}"+MaskResourceVersion)
	if strings.Contains(s, `resourceVersion`) || strings.Contains(s, `Timestamp`) {
		s = embeddedRV.ReplaceAllString(s, "${1}"+MaskResourceVersion)
		s = embeddedTimestamp.ReplaceAllString(s, "${1}"+MaskTimestamp)
	}
	return dropEmbeddedManagedFields(s)
}

// dropEmbeddedManagedFields removes the managedFields member, with the
// comma before it, from JSON quoted in s.
func dropEmbeddedManagedFields(s string) string {
	for {
		loc := embeddedManaged.FindStringIndex(s)
		if loc == nil {
			return s
		}
		// The list ends at the bracket that balances the one the match
		// ends with; field paths hold no brackets of their own.
		depth, end := 0, -1
		for i := loc[1] - 1; i < len(s) && end < 0; i++ {
			switch s[i] {
			case '[':
				depth++
			case ']':
				if depth--; depth == 0 {
					end = i + 1
				}
			}
		}
		if end < 0 {
			return s
		}
		start := loc[0]
		if s[start] != ',' && end < len(s) && s[end] == ',' {
			end++ // the first member: drop the comma after it instead
		}
		s = s[:start] + s[end:]
	}
}

// replaceWhole replaces the occurrences of old in s that are not part of
// a longer word of letters, digits, dots, dashes or colons, so that the
// learnt IP 10.0.0.1 is not found in 10.0.0.12, nor the port 30001 in
// 300012.
func replaceWhole(s, old, repl string) string {
	if old == "" || !strings.Contains(s, old) {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, old)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(old)
		if (i == 0 || !wordByte(s[i-1])) && (end == len(s) || !wordByte(s[end])) {
			b.WriteString(s[:i])
			b.WriteString(repl)
		} else {
			b.WriteString(s[:end])
		}
		s = s[end:]
	}
}

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == ':' || c == '_'
}

// walk masks v, found under key (the map key holding it, "" at the top or
// in a list); inStatus is true below a "status" key.
func (m *Masker) walk(v any, key string, inStatus bool) any {
	switch v := v.(type) {
	case string:
		if inStatus && timestamp.MatchString(v) {
			return MaskTimestamp
		}
		return m.String(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = m.walk(e, key, inStatus)
		}
		return out
	case map[string]any:
		return m.walkMap(v, key, inStatus)
	default:
		return v
	}
}

func (m *Masker) walkMap(obj map[string]any, key string, inStatus bool) map[string]any {
	service := obj["kind"] == "Service"
	out := make(map[string]any, len(obj))
	for k, e := range obj {
		switch {
		case key == "metadata" && k == "managedFields":
			if l, ok := e.([]any); ok {
				out[k] = sortManagedFields(m.walk(l, k, inStatus).([]any))
				continue
			}
		case key == "managedFields" && k == "time":
			// An entry's time is when its manager last wrote.
			if s, ok := e.(string); ok && s != "" {
				out[k] = MaskTimestamp
				continue
			}
		case k == "resourceVersion":
			if s, ok := e.(string); ok && s != "" {
				out[k] = MaskResourceVersion
				continue
			}
		case key == "metadata" && k == "continue":
			// A list's continue token holds a resourceVersion.
			if s, ok := e.(string); ok && s != "" {
				out[k] = MaskContinue
				continue
			}
		case key == "metadata" && (k == "creationTimestamp" || k == "deletionTimestamp"):
			if s, ok := e.(string); ok && s != "" {
				out[k] = MaskTimestamp
				continue
			}
		case service && k == "spec":
			if spec, ok := e.(map[string]any); ok {
				out[k] = m.walkMap(maskServiceSpec(spec), k, inStatus)
				continue
			}
		}
		out[m.String(k)] = m.walk(e, k, inStatus || k == "status")
	}
	return out
}

// maskServiceSpec returns spec with its allocated values replaced.
func maskServiceSpec(spec map[string]any) map[string]any {
	out := make(map[string]any, len(spec))
	for k, v := range spec {
		out[k] = v
	}
	if s, ok := spec["clusterIP"].(string); ok {
		out["clusterIP"] = maskIP(s)
	}
	if l, ok := spec["clusterIPs"].([]any); ok {
		ips := make([]any, len(l))
		for i, e := range l {
			if s, ok := e.(string); ok {
				ips[i] = maskIP(s)
			} else {
				ips[i] = e
			}
		}
		out["clusterIPs"] = ips
	}
	if n, ok := spec["healthCheckNodePort"].(json.Number); ok && n.String() != "0" {
		out["healthCheckNodePort"] = MaskPort
	}
	if l, ok := spec["ports"].([]any); ok {
		ports := make([]any, len(l))
		for i, e := range l {
			p, ok := e.(map[string]any)
			if !ok {
				ports[i] = e
				continue
			}
			cp := make(map[string]any, len(p))
			for k, v := range p {
				cp[k] = v
			}
			if n, ok := p["nodePort"].(json.Number); ok && n.String() != "0" {
				cp["nodePort"] = MaskPort
			}
			ports[i] = cp
		}
		out["ports"] = ports
	}
	return out
}

// DropUnrecordedManagedFields returns got without the
// metadata.managedFields of each object whose counterpart in want (same
// place) has none: goldens recorded while the masker dropped managedFields
// hold none, and those objects' managedFields are not compared until they
// are recorded again. got is not changed.
func DropUnrecordedManagedFields(want, got any) any {
	switch g := got.(type) {
	case map[string]any:
		w, _ := want.(map[string]any)
		out := make(map[string]any, len(g))
		for k, v := range g {
			if k == "metadata" {
				wm, _ := w[k].(map[string]any)
				if gm, ok := v.(map[string]any); ok {
					if _, recorded := wm["managedFields"]; !recorded {
						if _, has := gm["managedFields"]; has {
							c := make(map[string]any, len(gm))
							for mk, mv := range gm {
								if mk != "managedFields" {
									c[mk] = mv
								}
							}
							v = c
						}
					}
				}
				out[k] = v
				continue
			}
			out[k] = DropUnrecordedManagedFields(w[k], v)
		}
		return out
	case []any:
		w, _ := want.([]any)
		out := make([]any, len(g))
		for i, v := range g {
			var wv any
			if i < len(w) {
				wv = w[i]
			}
			out[i] = DropUnrecordedManagedFields(wv, v)
		}
		return out
	}
	return got
}

// sortManagedFields orders masked managedFields entries by what
// identifies them: operation, manager, apiVersion, subresource.
func sortManagedFields(l []any) []any {
	key := func(e any) string {
		m, _ := e.(map[string]any)
		var b strings.Builder
		for _, k := range []string{"operation", "manager", "apiVersion", "subresource"} {
			s, _ := m[k].(string)
			b.WriteString(s)
			b.WriteByte(0)
		}
		return b.String()
	}
	sort.SliceStable(l, func(i, j int) bool { return key(l[i]) < key(l[j]) })
	return l
}
