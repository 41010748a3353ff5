package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Manifests are what `--custom-resources` names: CustomResourceDefinitions
// and any other objects, in YAML or JSON files, applied when the server
// starts, as envtest installs its CRD paths.

// LoadManifests reads the objects of a YAML or JSON file (several YAML
// documents, or a List, are several objects), or of every .yaml, .yml and
// .json file of a directory and its subdirectories, in name order.
func LoadManifests(path string) ([]*unstructured.Unstructured, error) {
	return loadManifests(path, ParseManifests)
}

// ScanManifests reads the objects at path as LoadManifests does, skipping
// the documents that are not objects (no apiVersion or kind), such as
// the kustomization.yaml and kustomizeconfig.yaml of a kubebuilder
// project's config directories.
func ScanManifests(path string) ([]*unstructured.Unstructured, error) {
	return loadManifests(path, func(data []byte) ([]*unstructured.Unstructured, error) {
		return parseManifests(data, false)
	})
}

// loadManifests reads the files at path with parse.
func loadManifests(path string, parse func([]byte) ([]*unstructured.Unstructured, error)) ([]*unstructured.Unstructured, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("manifests: %w", err)
	}
	var files []string
	if !fi.IsDir() {
		files = []string{path}
	} else {
		err := filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch strings.ToLower(filepath.Ext(p)) {
			case ".yaml", ".yml", ".json":
				if !d.IsDir() {
					files = append(files, p)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("manifests: %w", err)
		}
		sort.Strings(files)
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("manifests: %w", err)
		}
		objs, err := parse(data)
		if err != nil {
			return nil, fmt.Errorf("manifests: %s: %w", f, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// ParseManifests reads the objects of YAML (one or more documents) or
// JSON; a List is its items. A document without apiVersion or kind is an
// error.
func ParseManifests(data []byte) ([]*unstructured.Unstructured, error) {
	return parseManifests(data, true)
}

// parseManifests reads the objects of data; a document without
// apiVersion or kind is an error when strict, skipped otherwise.
func parseManifests(data []byte, strict bool) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.IsList() {
			if err := u.EachListItem(func(o runtime.Object) error {
				item, ok := o.(*unstructured.Unstructured)
				if !ok {
					return fmt.Errorf("list item %T", o)
				}
				out = append(out, item)
				return nil
			}); err != nil {
				return nil, err
			}
			continue
		}
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			if !strict {
				continue
			}
			return nil, fmt.Errorf("object %q has no apiVersion or kind", u.GetName())
		}
		out = append(out, u)
	}
}

// Apply creates objs through the server's API, updating those that exist:
// CustomResourceDefinitions first, waited for until they are served, then
// the rest in order. ctx bounds the wait.
func (s *Server) Apply(ctx context.Context, objs []*unstructured.Unstructured) error {
	var crds, rest []*unstructured.Unstructured
	for _, o := range objs {
		if o.GroupVersionKind() == crdGVK {
			crds = append(crds, o)
		} else {
			rest = append(rest, o)
		}
	}
	for _, o := range crds {
		if err := s.applyOne(ctx, o); err != nil {
			return err
		}
	}
	for _, o := range crds {
		if err := s.waitServed(ctx, o.GetName()); err != nil {
			return err
		}
	}
	for _, o := range rest {
		if err := s.applyOne(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// waitServed waits until the definition name is Established.
func (s *Server) waitServed(ctx context.Context, name string) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if len(s.reg.CustomResources().ByCRD[name]) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("apply: CustomResourceDefinition %s not served: %w", name, ctx.Err())
		case <-tick.C:
		}
	}
}

// applyOne creates o, or updates it when it exists.
func (s *Server) applyOne(ctx context.Context, o *unstructured.Unstructured) error {
	gvk := o.GroupVersionKind()
	res := s.resourceForKind(gvk)
	if res == nil {
		return fmt.Errorf("apply: %s %q: no resource serves kind %v", gvk.Kind, o.GetName(), gvk)
	}
	ns := o.GetNamespace()
	if res.Namespaced && ns == "" {
		ns = "default"
	}
	collection := "/" + manifestPath(gvk.GroupVersion())
	if res.Namespaced {
		collection += "/namespaces/" + ns
	}
	collection += "/" + res.Plural
	body, err := json.Marshal(o.Object)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	code, answer := s.call(ctx, http.MethodPost, collection, body)
	if code == http.StatusConflict {
		code, answer = s.call(ctx, http.MethodGet, collection+"/"+o.GetName(), nil)
		if code == http.StatusOK {
			var cur unstructured.Unstructured
			if err := json.Unmarshal(answer, &cur.Object); err != nil {
				return fmt.Errorf("apply: %w", err)
			}
			upd := o.DeepCopy()
			upd.SetResourceVersion(cur.GetResourceVersion())
			if body, err = json.Marshal(upd.Object); err != nil {
				return fmt.Errorf("apply: %w", err)
			}
			code, answer = s.call(ctx, http.MethodPut, collection+"/"+o.GetName(), body)
		}
	}
	if code >= 300 {
		return fmt.Errorf("apply: %s %q: %d %s", gvk.Kind, o.GetName(), code, strings.TrimSpace(string(answer)))
	}
	return nil
}

// call sends one request to the server's own handler.
func (s *Server) call(ctx context.Context, method, path string, body []byte) (int, []byte) {
	req := httptest.NewRequestWithContext(ctx, method, path, bytes.NewReader(body))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	s.handler.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

// resourceForKind finds the resource serving gvk, built-in or custom.
func (s *Server) resourceForKind(gvk schema.GroupVersionKind) *resource {
	for _, r := range s.reg.Resources(gvk.GroupVersion().String()) {
		if r.GVK.Kind == gvk.Kind {
			return r
		}
	}
	return nil
}

func manifestPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}
