package controllermanager

import (
	"log/slog"
	"testing"
	"time"

	"github.com/listwatch/listwatch/controller"
	"github.com/listwatch/listwatch/record"
)

// TestControllerOptions: every controller gets the manager's stale-read
// timeout unless its own options set one, and a recorder for the events
// of its timeouts.
func TestControllerOptions(t *testing.T) {
	own := &record.Recorder{}
	for _, tc := range []struct {
		name        string
		managerWait time.Duration
		in          controller.Options
		wantWait    time.Duration
		wantOwnRec  bool
	}{
		{name: "defaults", wantWait: 0},
		{name: "the manager's timeout", managerWait: 3 * time.Second, wantWait: 3 * time.Second},
		{name: "protection off for all", managerWait: -1, wantWait: -1},
		{name: "the controller's own timeout and recorder", managerWait: 3 * time.Second, in: controller.Options{StaleReadTimeout: time.Second, Recorder: own}, wantWait: time.Second, wantOwnRec: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := deps{m: &Manager{cfg: Config{StaleReadTimeout: tc.managerWait}, log: slog.New(slog.DiscardHandler)}, events: record.NewBroadcaster(nil, record.Options{})}
			got := d.options("replicaset-controller", tc.in)
			if got.StaleReadTimeout != tc.wantWait {
				t.Errorf("StaleReadTimeout = %v, want %v", got.StaleReadTimeout, tc.wantWait)
			}
			if got.Recorder == nil {
				t.Fatal("no recorder")
			}
			if (got.Recorder == controller.EventRecorder(own)) != tc.wantOwnRec {
				t.Errorf("Recorder = %v, want the controller's own: %v", got.Recorder, tc.wantOwnRec)
			}
			if got.Logger == nil || got.Metrics != d.m.queueMetrics {
				t.Errorf("logger or metrics not filled in: %+v", got)
			}
		})
	}
}
