package apiserver

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubesharding "k8s.io/apiserver/pkg/sharding"

	"github.com/listwatch/listwatch/apiserver/internal/registry"
)

// quarters are the selectors of four shards of the uids' hash space, as a
// client splitting its work four ways asks for them.
var quarters = []string{
	"shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000')",
	"shardRange(object.metadata.uid, '0x4000000000000000', '0x8000000000000000')",
	"shardRange(object.metadata.uid, '0x8000000000000000', '0xc000000000000000')",
	"shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')",
}

// inShard reports whether kube's own evaluation of selector puts the
// object with uid in its shard.
func inShard(t *testing.T, selector, uid string) bool {
	t.Helper()
	sel, err := kubesharding.Parse(selector)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := sel.Matches(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}})
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// itemNames returns the names of a JSON list's items.
func itemNames(list map[string]any) []string {
	var out []string
	items, _ := list["items"].([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		out = append(out, str(m, "metadata.name"))
	}
	return out
}

// TestShardSelector: lists and watches with a shardSelector, of a built-in
// and of a custom resource, hold exactly the objects kube's evaluation
// puts in the shard, and the four shards of a split hold every object
// once; lists of built-in resources echo the selector in shardInfo, in
// JSON and in protobuf.
func TestShardSelector(t *testing.T) {
	forEachBackend(t, func(t *testing.T, c *client) {
		for _, coll := range []string{"/api/v1/namespaces/default/configmaps", "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos"} {
			t.Run(coll, func(t *testing.T) { testShardCollection(t, c, coll) })
		}
		testShardProtobuf(t, c)
	})
}

func testShardCollection(t *testing.T, c *client, coll string) {
	const n = 40
	kind := "ConfigMap"
	if coll != "/api/v1/namespaces/default/configmaps" {
		kind = "Foo"
	}
	start := c.mustDo("GET", coll, "", "", 200)
	// Watches from before the writes, one per shard.
	watches := make([]*watchStream, len(quarters))
	for i, q := range quarters {
		watches[i] = c.watch(coll + "?watch=true&resourceVersion=" + str(start, "metadata.resourceVersion") + "&shardSelector=" + url.QueryEscape(q))
	}
	uids := map[string]string{}
	var order []string
	for i := range n {
		name := fmt.Sprintf("o%02d", i)
		apiVersion := "v1"
		if kind == "Foo" {
			apiVersion = "samplecontroller.k8s.io/v1alpha1"
		}
		obj := c.mustDo("POST", coll, "", fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"name":%q}}`, apiVersion, kind, name), 201)
		uids[name] = str(obj, "metadata.uid")
		order = append(order, name)
	}
	seen := map[string]int{}
	for i, q := range quarters {
		var want []string
		for _, name := range order {
			if inShard(t, q, uids[name]) {
				want = append(want, name)
			}
		}
		list := c.mustDo("GET", coll+"?shardSelector="+url.QueryEscape(q), "", "", 200)
		if got := itemNames(list); !slices.Equal(got, want) {
			t.Errorf("shard %d lists %v, want %v", i, got, want)
		}
		for _, name := range itemNames(list) {
			seen[name]++
		}
		// As kube-apiserver, whose custom resource lists
		// (UnstructuredList) carry none.
		wantInfo := q
		if kind == "Foo" {
			wantInfo = ""
		}
		if got := str(list, "metadata.shardInfo.selector"); got != wantInfo {
			t.Errorf("shard %d: shardInfo.selector %q, want %q", i, got, wantInfo)
		}
		// Pages of two hold the same objects, each page its shardInfo.
		var paged []string
		for cont := ""; ; {
			page := c.mustDo("GET", coll+"?limit=2&shardSelector="+url.QueryEscape(q)+"&continue="+url.QueryEscape(cont), "", "", 200)
			if str(page, "metadata.shardInfo.selector") != wantInfo || nested(page, "metadata.remainingItemCount") != nil {
				t.Errorf("shard %d page metadata %v", i, page["metadata"])
			}
			paged = append(paged, itemNames(page)...)
			if cont = str(page, "metadata.continue"); cont == "" {
				break
			}
		}
		if !slices.Equal(paged, want) {
			t.Errorf("shard %d pages hold %v, want %v", i, paged, want)
		}
		for _, name := range want {
			watches[i].expect("ADDED", name)
		}
	}
	for _, name := range order {
		if seen[name] != 1 {
			t.Errorf("%s is in %d shards", name, seen[name])
		}
	}
	if all := c.mustDo("GET", coll, "", "", 200); nested(all, "metadata.shardInfo") != nil {
		t.Errorf("unsharded list has shardInfo %v", nested(all, "metadata.shardInfo"))
	}
	// A delete goes to the one shard that holds the object.
	c.mustDo("DELETE", coll+"/o00", "", "", 200)
	for i, q := range quarters {
		if inShard(t, q, uids["o00"]) {
			watches[i].expect("DELETED", "o00")
		}
	}
}

// testShardProtobuf: a protobuf list carries shardInfo in its ListMeta.
func testShardProtobuf(t *testing.T, c *client) {
	const coll = "/api/v1/namespaces/default/configmaps"
	r := c.do("GET", coll+"?shardSelector="+url.QueryEscape(quarters[1]), "", "", "Accept", "application/vnd.kubernetes.protobuf")
	obj, _, err := registry.Protobuf.Decode(r.body, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	list, ok := obj.(*corev1.ConfigMapList)
	if !ok {
		t.Fatalf("protobuf list: %T", obj)
	}
	if list.ShardInfo == nil || list.ShardInfo.Selector != quarters[1] {
		t.Errorf("protobuf shardInfo %v", list.ShardInfo)
	}
	for _, cm := range list.Items {
		if !inShard(t, quarters[1], string(cm.UID)) {
			t.Errorf("%s is not in the shard", cm.Name)
		}
	}
}

// TestShardSelectorErrors: what kube's parser refuses is a 500 quoting
// it, on lists, watches and deletecollections alike.
func TestShardSelectorErrors(t *testing.T) {
	c := newClient(t, backends[0].New(t))
	const coll = "/api/v1/namespaces/default/configmaps"
	bad := "shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')"
	_, parseErr := kubesharding.Parse(bad)
	for _, q := range []string{"", "?watch=true"} {
		sep := "?"
		if q != "" {
			sep = "&"
		}
		r := c.do("GET", coll+q+sep+"shardSelector="+url.QueryEscape(bad), "", "")
		st := r.status(t)
		if r.code != http.StatusInternalServerError || st.Reason != "" || st.Message != "invalid shard selector: "+parseErr.Error() {
			t.Errorf("GET %q: %d %+v", q, r.code, st)
		}
	}
	r := c.do("DELETE", coll+"?shardSelector="+url.QueryEscape(bad), "", "")
	if r.code != http.StatusInternalServerError {
		t.Errorf("deletecollection: %d %s", r.code, r.body)
	}
}

// TestShardSelectorGateOff: with ShardedListAndWatch off the server, as
// kube-apiserver with the gate off, ignores shardSelector, even one that
// does not parse.
func TestShardSelectorGateOff(t *testing.T) {
	c := newClientConfig(t, backends[0].New(t), func(cfg *Config) { cfg.DisableShardedListAndWatch = true })
	const coll = "/api/v1/namespaces/default/configmaps"
	for i := range 8 {
		c.mustDo("POST", coll, "", fmt.Sprintf(`{"metadata":{"name":"c%d"}}`, i), 201)
	}
	for _, sel := range []string{quarters[0], "not a selector"} {
		list := c.mustDo("GET", coll+"?shardSelector="+url.QueryEscape(sel), "", "", 200)
		if len(itemNames(list)) != 8 || nested(list, "metadata.shardInfo") != nil {
			t.Errorf("%q: %v, metadata %v", sel, itemNames(list), list["metadata"])
		}
	}
	w := c.watch(coll + "?watch=true&shardSelector=" + url.QueryEscape(quarters[0]))
	for range 8 {
		w.expect("ADDED", "")
	}
}

// TestShardSelectorDeleteCollection: a deletecollection with a
// shardSelector deletes the shard alone, and its answer says so.
func TestShardSelectorDeleteCollection(t *testing.T) {
	c := newClient(t, backends[0].New(t))
	const coll = "/api/v1/namespaces/default/configmaps"
	uids := map[string]string{}
	for i := range 12 {
		obj := c.mustDo("POST", coll, "", fmt.Sprintf(`{"metadata":{"name":"c%02d"}}`, i), 201)
		uids[str(obj, "metadata.name")] = str(obj, "metadata.uid")
	}
	sel := "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
	out := c.mustDo("DELETE", coll+"?shardSelector="+url.QueryEscape(sel), "", "", 200)
	if str(out, "metadata.shardInfo.selector") != sel {
		t.Errorf("deletecollection metadata %v", out["metadata"])
	}
	deleted := itemNames(out)
	left := itemNames(c.mustDo("GET", coll, "", "", 200))
	for name, uid := range uids {
		if in := inShard(t, sel, uid); in != slices.Contains(deleted, name) || in == slices.Contains(left, name) {
			t.Errorf("%s (in shard: %v): deleted %v, left %v", name, in, deleted, left)
		}
	}
}
