package client

import (
	"net/url"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The query parameters of the request options, spelled as the API server
// reads them. Only what is set is sent.

func setStr(q url.Values, k, v string) {
	if v != "" {
		q.Set(k, v)
	}
}

func setBool(q url.Values, k string, v bool) {
	if v {
		q.Set(k, "true")
	}
}

func setDryRun(q url.Values, dryRun []string) {
	for _, d := range dryRun {
		q.Add("dryRun", d)
	}
}

func listQuery(o metav1.ListOptions) url.Values {
	q := url.Values{}
	setStr(q, "labelSelector", o.LabelSelector)
	setStr(q, "fieldSelector", o.FieldSelector)
	setStr(q, "shardSelector", o.ShardSelector)
	setBool(q, "watch", o.Watch)
	setBool(q, "allowWatchBookmarks", o.AllowWatchBookmarks)
	setStr(q, "resourceVersion", o.ResourceVersion)
	setStr(q, "resourceVersionMatch", string(o.ResourceVersionMatch))
	if o.TimeoutSeconds != nil {
		q.Set("timeoutSeconds", strconv.FormatInt(*o.TimeoutSeconds, 10))
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.FormatInt(o.Limit, 10))
	}
	setStr(q, "continue", o.Continue)
	if o.SendInitialEvents != nil {
		q.Set("sendInitialEvents", strconv.FormatBool(*o.SendInitialEvents))
	}
	return q
}

func getQuery(o metav1.GetOptions) url.Values {
	q := url.Values{}
	setStr(q, "resourceVersion", o.ResourceVersion)
	return q
}

func createQuery(o metav1.CreateOptions) url.Values {
	return writeQuery(o.DryRun, o.FieldManager, o.FieldValidation)
}

func updateQuery(o metav1.UpdateOptions) url.Values {
	return writeQuery(o.DryRun, o.FieldManager, o.FieldValidation)
}

// writeQuery holds the options every write takes.
func writeQuery(dryRun []string, fieldManager, fieldValidation string) url.Values {
	q := url.Values{}
	setDryRun(q, dryRun)
	setStr(q, "fieldManager", fieldManager)
	setStr(q, "fieldValidation", fieldValidation)
	return q
}

func patchQuery(o metav1.PatchOptions) url.Values {
	q := writeQuery(o.DryRun, o.FieldManager, o.FieldValidation)
	if o.Force != nil {
		q.Set("force", strconv.FormatBool(*o.Force))
	}
	return q
}
