package apiserver

import (
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
)

// newUID returns a random RFC 4122 version 4 UUID.
func newUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// nameSuffixAlphabet has no vowels (no words) and no look-alikes, as the
// suffixes kube-apiserver generates.
const nameSuffixAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// suffixSource, when set, replaces randomSuffix: tests force name clashes
// with it while the server runs.
var suffixSource atomic.Pointer[func(n int) string]

// nameSuffix draws the suffix of a generated name.
func nameSuffix(n int) string {
	if f := suffixSource.Load(); f != nil {
		return (*f)(n)
	}
	return randomSuffix(n)
}

// randomSuffix returns n characters for generateName.
func randomSuffix(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = nameSuffixAlphabet[int(b[i])%len(nameSuffixAlphabet)]
	}
	return string(b)
}

// maxGeneratedNameLength leaves room for the 5-character suffix in a
// 63-character name, as kube-apiserver does.
const maxGeneratedNameLength = 63 - 5

// deepCopy returns an independent copy of u.
func deepCopy(u *unstructured.Unstructured) *unstructured.Unstructured {
	return u.DeepCopy()
}

// copyObject is a deep copy of obj.
func copyObject(obj object) (object, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return deepCopy(u), nil
	}
	return registry.AsObject(obj.DeepCopyObject())
}
