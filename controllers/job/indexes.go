package job

import (
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// span is a run of completion indexes, first to last inclusive.
type span struct{ first, last int }

// indexSet is a set of completion indexes as ordered, disjoint,
// non-adjacent spans: the shape of status.completedIndexes, "1,3-5,7".
type indexSet []span

// parseIndexSet reads an index list such as "1,3-5,7", keeping only the
// indexes below completions; malformed items are skipped, as kube skips
// them.
func parseIndexSet(s string, completions int) indexSet {
	var out indexSet
	if s == "" {
		return nil
	}
	for item := range strings.SplitSeq(s, ",") {
		lo, hi, ranged := strings.Cut(item, "-")
		first, err := strconv.Atoi(lo)
		if err != nil || first < 0 {
			continue
		}
		if first >= completions {
			break
		}
		last := first
		if ranged {
			if last, err = strconv.Atoi(hi); err != nil {
				continue
			}
			last = min(last, completions-1)
		}
		out = out.union(indexSet{{first, last}})
	}
	return out
}

// with returns the set with the given indexes added.
func (s indexSet) with(ixs ...int) indexSet {
	slices.Sort(ixs)
	add := make(indexSet, 0, len(ixs))
	for _, ix := range ixs {
		add = append(add, span{ix, ix})
	}
	return s.union(add)
}

// union merges two sets.
func (s indexSet) union(o indexSet) indexSet {
	all := append(slices.Clone(s), o...)
	slices.SortFunc(all, func(a, b span) int { return a.first - b.first })
	var out indexSet
	for _, sp := range all {
		if n := len(out); n > 0 && sp.first <= out[n-1].last+1 {
			out[n-1].last = max(out[n-1].last, sp.last)
			continue
		}
		out = append(out, sp)
	}
	return out
}

// total counts the indexes.
func (s indexSet) total() int {
	n := 0
	for _, sp := range s {
		n += sp.last - sp.first + 1
	}
	return n
}

// has reports whether ix is in the set.
func (s indexSet) has(ix int) bool {
	i, _ := slices.BinarySearchFunc(s, ix, func(sp span, ix int) int {
		if sp.last < ix {
			return -1
		}
		return 1
	})
	return i < len(s) && s[i].first <= ix
}

// overlap counts the indexes both sets hold.
func (s indexSet) overlap(o indexSet) int {
	n := 0
	for i, j := 0, 0; i < len(s) && j < len(o); {
		if k := min(s[i].last, o[j].last) - max(s[i].first, o[j].first) + 1; k > 0 {
			n += k
		}
		if s[i].last < o[j].last {
			i++
		} else {
			j++
		}
	}
	return n
}

// String writes the set as the API does: pairs as "3,4", longer runs as
// "3-5".
func (s indexSet) String() string {
	var b strings.Builder
	for _, sp := range s {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(sp.first))
		switch {
		case sp.last == sp.first+1:
			b.WriteByte(',')
			b.WriteString(strconv.Itoa(sp.last))
		case sp.last > sp.first:
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(sp.last))
		}
	}
	return b.String()
}

// noIndex is the completion index of a pod that has none.
const noIndex = -1

// completionIndex reads a pod's completion index annotation; noIndex
// when it has none or a malformed one.
func completionIndex(pod *corev1.Pod) int {
	v, ok := pod.Annotations[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		return noIndex
	}
	ix, err := strconv.Atoi(v)
	if err != nil || ix < 0 {
		return noIndex
	}
	return ix
}

// indexesOf returns the completion indexes of pods.
func indexesOf(pods []*corev1.Pod) []int {
	var out []int
	for _, p := range pods {
		if ix := completionIndex(p); ix != noIndex {
			out = append(out, ix)
		}
	}
	return out
}

// pendingIndexes returns up to count of the lowest indexes below
// completions that are in none of taken.
func pendingIndexes(count, completions int, taken indexSet) []int {
	var out []int
	for ix := 0; ix < completions && len(out) < count; ix++ {
		if !taken.has(ix) {
			out = append(out, ix)
		}
	}
	return out
}
