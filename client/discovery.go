package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// APIResource is one resource a server serves, as its discovery documents
// describe it.
type APIResource struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
	Singular   string
	ShortNames []string
	Categories []string
	Verbs      []string
}

// ServerResources reads the server's discovery documents (/api, /apis and
// the resource list of each group's preferred version) and returns the
// top-level resources, subresources left out. Callers that need to know
// which kinds a server serves (custom ones included) use it instead of a
// hard-coded list.
func (c *Client) ServerResources(ctx context.Context) ([]APIResource, error) {
	var versions metav1.APIVersions
	if err := c.getJSON(ctx, "/api", &versions); err != nil {
		return nil, err
	}
	gvs := make([]schema.GroupVersion, 0, len(versions.Versions))
	for _, v := range versions.Versions {
		gvs = append(gvs, schema.GroupVersion{Version: v})
	}
	var groups metav1.APIGroupList
	if err := c.getJSON(ctx, "/apis", &groups); err != nil {
		return nil, err
	}
	for _, g := range groups.Groups {
		v := g.PreferredVersion.Version
		if v == "" && len(g.Versions) > 0 {
			v = g.Versions[0].Version
		}
		if v != "" {
			gvs = append(gvs, schema.GroupVersion{Group: g.Name, Version: v})
		}
	}
	var out []APIResource
	for _, gv := range gvs {
		path := "/api/" + url.PathEscape(gv.Version)
		if gv.Group != "" {
			path = "/apis/" + url.PathEscape(gv.Group) + "/" + url.PathEscape(gv.Version)
		}
		var list metav1.APIResourceList
		if err := c.getJSON(ctx, path, &list); err != nil {
			return nil, err
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			out = append(out, APIResource{GVR: gv.WithResource(r.Name), Kind: r.Kind, Namespaced: r.Namespaced,
				Singular: r.SingularName, ShortNames: r.ShortNames, Categories: r.Categories, Verbs: r.Verbs})
		}
	}
	return out, nil
}

// getJSON reads the JSON document at path into v.
func (c *Client) getJSON(ctx context.Context, path string, v any) error {
	req := &request{verb: http.MethodGet, path: path, accept: acceptJSON}
	resp, err := c.send(ctx, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, int64(c.maxEvent))).Decode(v); err != nil {
		return fmt.Errorf("GET %s: decoding: %w", path, err)
	}
	return nil
}

// ServerResourcesForGroupVersion reads the discovery document of gv: its
// resources and subresources (pods/status, deployments/scale) with their
// kinds.
func (c *Client) ServerResourcesForGroupVersion(ctx context.Context, gv schema.GroupVersion) (*metav1.APIResourceList, error) {
	path := "/api/" + url.PathEscape(gv.Version)
	if gv.Group != "" {
		path = "/apis/" + url.PathEscape(gv.Group) + "/" + url.PathEscape(gv.Version)
	}
	var list metav1.APIResourceList
	if err := c.getJSON(ctx, path, &list); err != nil {
		return nil, err
	}
	return &list, nil
}
