package temporal

import "testing"

// A worker keeps enough polls open for the children it runs: a busy
// worker's children do not wait in the task queue while it has room.
func TestWorkerPollers(t *testing.T) {
	for _, tc := range []struct{ concurrency, workflowTasks, activityTasks int }{
		{1, 2, 2}, {DefaultConcurrency, 2, 2}, {50, 12, 6}, {1000, 16, 8},
	} {
		w, err := NewWorker(WorkerOptions{Concurrency: tc.concurrency})
		if err != nil {
			t.Fatal(err)
		}
		o := w.sdkOptions()
		if o.MaxConcurrentWorkflowTaskPollers != tc.workflowTasks || o.MaxConcurrentActivityTaskPollers != tc.activityTasks ||
			o.MaxConcurrentActivityExecutionSize != tc.concurrency {
			t.Errorf("concurrency %d: %d workflow-task and %d activity-task pollers, %d activities: want %d, %d, %d", tc.concurrency,
				o.MaxConcurrentWorkflowTaskPollers, o.MaxConcurrentActivityTaskPollers, o.MaxConcurrentActivityExecutionSize,
				tc.workflowTasks, tc.activityTasks, tc.concurrency)
		}
	}
}
