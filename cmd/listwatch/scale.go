package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func init() {
	register("scale", "set the replicas of a replication controller (scale rc/NAME --replicas N) or any scalable object", func(ctx context.Context, args []string) error {
		return runScale(ctx, args, os.Stdout, os.Stderr)
	})
}

func runScale(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newClientCommand("scale", "listwatch scale <resource>/NAME | <resource> NAME --replicas N [-n ns]", stderr)
	replicas := cmd.fs.Int("replicas", -1, "the new number of replicas (required)")
	pos, err := cmd.parse(args)
	if err != nil {
		return err
	}
	if *replicas < 0 {
		cmd.fs.Usage()
		return errors.New("--replicas N (N ≥ 0) is required")
	}
	refs, err := parseObjectRefs(pos)
	if err != nil {
		return err
	}
	if len(refs) == 0 {
		cmd.fs.Usage()
		return errors.New("want what to scale, e.g. rc/web")
	}
	c, defaultNS, m, err := cmd.connect(ctx)
	if err != nil {
		return err
	}
	// spec.replicas is where every scalable kind keeps its desired count;
	// a merge patch of it is what the scale subresource does, and works
	// for kinds that lack the subresource too.
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, *replicas)
	var errs []error
	for _, ref := range refs {
		t, err := resolveRef(c, m, ref, defaultNS)
		if err != nil {
			return err
		}
		label := kindLabel(t.res) + "/" + ref.name
		if _, err := t.api.Patch(ctx, ref.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("scaling %s: %w", label, err))
			continue
		}
		fmt.Fprintf(stdout, "%s scaled\n", label)
	}
	return errors.Join(errs...)
}
