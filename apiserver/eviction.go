package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/util/dryrun"
	"k8s.io/client-go/util/retry"

	"github.com/listwatch/listwatch/apiserver/internal/decode"
	"github.com/listwatch/listwatch/apiserver/internal/kube"
	"github.com/listwatch/listwatch/apiserver/internal/registry"
	"github.com/listwatch/listwatch/resources"
)

// evictionResource describes policy/v1 Eviction for decoding bodies of
// pods/{name}/eviction.
var evictionResource = &resource{GVK: kube.EvictionKind, Plural: "evictions"}

// handleEviction serves pods/{name}/eviction as kube-apiserver's eviction
// storage does: the pod is deleted, with its delete options, if its
// PodDisruptionBudget allows it (kube.Eviction, evict), and the answer is
// a 201 Success Status.
func (s *Server) handleEviction(w http.ResponseWriter, r *http.Request, req request) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	format, err := decode.RequestFormat(r, evictionResource, true)
	if err != nil {
		return err
	}
	js, err := decode.ToJSON(evictionResource, format, body)
	if err != nil {
		return err
	}
	// The namespace's lifecycle is the first of kube's admission plugins.
	if err := s.namespaceExists(r.Context(), req.res, req.namespace, req.name); err != nil {
		return err
	}
	opts, err := kube.Eviction(r.Context(), s.write(r.Context(), req, "create", req.name).KubeRequest(), js)
	if err != nil {
		return err
	}
	if err := s.evict(r.Context(), req, opts); err != nil {
		return err
	}
	writeStatusObject(w, &metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated})
	return nil
}

// evict is kube's EvictionREST.Create after its checks of the Eviction:
// a pod terminal, pending or being deleted is deleted at once; any other
// is deleted once the one PodDisruptionBudget selecting it (none, or more
// than one: 500) has allowed it, its status written with the pod in
// disruptedPods and one disruption fewer allowed (an unready pod the
// budget can spare is deleted without spending it). Before the delete the
// pod is given the DisruptionTarget condition. The budgets are read and
// written through the server's loopback client, as kube-apiserver's
// storage does through its own.
func (s *Server) evict(ctx context.Context, req request, opts *metav1.DeleteOptions) error {
	if s.self == nil {
		return apierrors.NewInternalError(fmt.Errorf("apiserver: no loopback client for evictions"))
	}
	req.sub = ""
	// The pod is written and deleted by the eviction's storage, under
	// no admission of its own.
	req.internal = true
	retryConflicts := apierrors.IsConflict
	if !versionUnset(opts) {
		retryConflicts = func(error) bool { return false }
	}
	var pod *corev1.Pod
	deleted := false
	err := retry.OnError(kube.EvictionRetry, retryConflicts, func() error {
		var err error
		if pod, err = s.readPod(ctx, req); err != nil {
			return err
		}
		if !kube.EvictionSkipsBudgets(pod) {
			return nil
		}
		o := opts
		if kube.EvictionPinsVersion(pod) && versionUnset(opts) {
			o = withVersion(opts, pod.ResourceVersion)
		}
		if err := s.markAndDelete(ctx, req, o); err != nil {
			return err
		}
		deleted = true
		return nil
	})
	if err != nil || deleted {
		return err
	}

	budgets := s.self.client.PolicyV1().PodDisruptionBudgets(pod.Namespace)
	list, err := budgets.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	pdbs := kube.PodBudgets(pod, list.Items)
	if len(pdbs) > 1 {
		return kube.ErrTooManyBudgets
	}
	unhealthy := false
	var pdbName string
	if len(pdbs) == 1 {
		pdb := &pdbs[0]
		pdbName = pdb.Name
		if kube.EvictUnhealthy(pod, pdb) {
			unhealthy = true
		} else {
			refresh := false
			err = retry.RetryOnConflict(kube.EvictionRetry, func() error {
				if refresh {
					if pdb, err = budgets.Get(ctx, pdbName, metav1.GetOptions{}); err != nil {
						return err
					}
				}
				spent := pdb.DeepCopy()
				write, err := kube.SpendBudget(spent, pod.Name, dryrun.IsDryRun(opts.DryRun), time.Now())
				if err == nil && write {
					_, err = budgets.UpdateStatus(ctx, spent, metav1.UpdateOptions{})
				}
				refresh = err != nil
				return err
			})
			if wait.Interrupted(err) {
				err = kube.BudgetConflicts(pdbName)
			}
			if err != nil {
				return err
			}
		}
	}
	o := opts
	if unhealthy {
		// The pod is deleted only if it has not become Ready since.
		o = withVersion(opts, pod.ResourceVersion)
	}
	err = s.markAndDelete(ctx, req, o)
	if unhealthy && versionUnset(opts) && apierrors.IsConflict(err) {
		return kube.BudgetBusy(pdbName)
	}
	return err
}

// readPod reads req's pod as stored.
func (s *Server) readPod(ctx context.Context, req request) (*corev1.Pod, error) {
	kv, err := s.cfg.Storage.Get(ctx, registry.KeyFor(req.res, req.namespace, req.name))
	if err != nil {
		return nil, s.storageErr(req, err)
	}
	obj, err := req.res.DecodeObject(kv)
	if err != nil {
		return nil, err
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("apiserver: pod %s as %T", req.name, obj))
	}
	return pod, nil
}

// markAndDelete gives req's pod the DisruptionTarget condition, through
// pods' status rules, unless opts are a dry run, and deletes it with
// opts; a resourceVersion precondition of opts moves to the version the
// condition was written at.
func (s *Server) markAndDelete(ctx context.Context, req request, opts *metav1.DeleteOptions) error {
	if !dryrun.IsDryRun(opts.DryRun) {
		status := req
		status.sub = resources.Status
		out, err := s.update(ctx, status, func(cur object) (object, error) {
			pod, ok := cur.(*corev1.Pod)
			if !ok {
				return nil, apierrors.NewInternalError(fmt.Errorf("apiserver: pod %s as %T", req.name, cur))
			}
			return pod, kube.MarkDisruptionTarget(pod, opts)
		})
		if err != nil {
			return err
		}
		if !versionUnset(opts) {
			opts = withVersion(opts, out.GetResourceVersion())
		}
	}
	req.dryRun = req.dryRun || len(opts.DryRun) > 0
	_, _, err := s.delete(ctx, req, *opts)
	return err
}

// versionUnset reports whether opts have no resourceVersion precondition.
func versionUnset(opts *metav1.DeleteOptions) bool {
	return opts.Preconditions == nil || opts.Preconditions.ResourceVersion == nil
}

// withVersion is a copy of opts with rv as their resourceVersion
// precondition.
func withVersion(opts *metav1.DeleteOptions, rv string) *metav1.DeleteOptions {
	o := opts.DeepCopy()
	if o.Preconditions == nil {
		o.Preconditions = &metav1.Preconditions{}
	}
	o.Preconditions.ResourceVersion = &rv
	return o
}
