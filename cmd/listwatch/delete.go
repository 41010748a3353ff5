package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	register("delete", "delete objects by resource and name (delete rc web) or those of a file (-f FILE)", func(ctx context.Context, args []string) error {
		return runDelete(ctx, args, os.Stdin, os.Stdout, os.Stderr)
	})
}

// cascadePolicies maps --cascade to the propagation policy sent.
var cascadePolicies = map[string]metav1.DeletionPropagation{
	"background": metav1.DeletePropagationBackground,
	"foreground": metav1.DeletePropagationForeground,
	"orphan":     metav1.DeletePropagationOrphan,
}

func runDelete(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := newClientCommand("delete", "listwatch delete <resource> NAME... | <resource>/NAME... | -f FILE  [-n ns] [--cascade background|foreground|orphan]", stderr)
	fs := cmd.fs
	var files stringList
	fs.Var(&files, "f", "file of objects to delete, YAML or JSON (- for stdin); repeatable")
	cascade := fs.String("cascade", "background", "what becomes of the objects' dependents: background (deleted after), foreground (deleted first) or orphan (kept)")
	ignoreNotFound := fs.Bool("ignore-not-found", false, "treat objects that do not exist as deleted")
	pos, err := cmd.parse(args)
	if err != nil {
		return err
	}
	policy, ok := cascadePolicies[*cascade]
	if !ok {
		return fmt.Errorf("--cascade %q: want background, foreground or orphan", *cascade)
	}
	if (len(files) == 0) == (len(pos) == 0) {
		fs.Usage()
		return errors.New("want either -f FILE or a resource and names")
	}
	objs, err := readAllManifests(files, stdin)
	if err != nil {
		return err
	}
	c, defaultNS, m, err := cmd.connect(ctx)
	if err != nil {
		return err
	}
	type victim struct {
		t    target
		name string
	}
	var victims []victim
	for _, obj := range objs {
		t, err := resolve(c, m, obj, cmd.namespace, defaultNS)
		if err != nil {
			return err
		}
		victims = append(victims, victim{t, obj.GetName()})
	}
	refs, err := parseObjectRefs(pos)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		t, err := resolveRef(c, m, ref, defaultNS)
		if err != nil {
			return err
		}
		victims = append(victims, victim{t, ref.name})
	}
	var errs []error
	for _, v := range victims {
		label := kindLabel(v.t.res) + "/" + v.name
		err := v.t.api.Delete(ctx, v.name, metav1.DeleteOptions{PropagationPolicy: &policy})
		switch {
		case apierrors.IsNotFound(err) && *ignoreNotFound:
		case err != nil:
			errs = append(errs, fmt.Errorf("deleting %s: %w", label, err))
		default:
			fmt.Fprintf(stdout, "%s deleted\n", label)
		}
	}
	return errors.Join(errs...)
}

// objectRef is a resource and a name from the command line.
type objectRef struct{ resource, name string }

// parseObjectRefs reads "rc web db" (a resource, then names) or
// "rc/web svc/db" (resource/name pairs), as kubectl does.
func parseObjectRefs(pos []string) ([]objectRef, error) {
	if len(pos) == 0 {
		return nil, nil
	}
	var refs []objectRef
	if strings.Contains(pos[0], "/") {
		for _, p := range pos {
			res, name, ok := strings.Cut(p, "/")
			if !ok || res == "" || name == "" || strings.Contains(name, "/") {
				return nil, fmt.Errorf("%q: want resource/name for every argument once one has that form", p)
			}
			refs = append(refs, objectRef{res, name})
		}
		return refs, nil
	}
	if len(pos) < 2 {
		return nil, fmt.Errorf("resource %q: which names? (%s NAME, or %s --all is not supported)", pos[0], pos[0], pos[0])
	}
	for _, name := range pos[1:] {
		if strings.Contains(name, "/") {
			return nil, fmt.Errorf("%q: a name cannot contain /", name)
		}
		refs = append(refs, objectRef{pos[0], name})
	}
	return refs, nil
}
