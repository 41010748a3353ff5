package deployment

import (
	"encoding/binary"
	"hash/fnv"
	"strconv"

	"github.com/davecgh/go-spew/spew"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// templatePrinter prints a value the way kube's deep hash does (every
// field, map keys sorted, no String or Error methods), so that the hash of
// a template is the same here as in kube-controller-manager and a
// Deployment made by one finds the ReplicaSets the other created.
var templatePrinter = spew.ConfigState{Indent: " ", SortKeys: true, DisableMethods: true, SpewKeys: true}

// PodTemplateHash returns the pod-template-hash of template: the value of
// the label that names a Deployment's ReplicaSet and tells its pods apart
// from those of the Deployment's other ReplicaSets. It is kube's: FNV-32a
// over the template printed in full, then over collisionCount (when set)
// as 8 little-endian bytes, the sum written in decimal and encoded with
// rand.SafeEncodeString. collisionCount is the Deployment's
// status.collisionCount, which the controller raises when the name the
// hash gives is taken by a ReplicaSet with another template.
func PodTemplateHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	templatePrinter.Fprintf(h, "%#v", *template)
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		_, _ = h.Write(b)
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}
