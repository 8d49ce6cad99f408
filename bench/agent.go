package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Agent runs plans sent by a coordinator (`sluice bench run --agents`), one at a time, over HTTP
// and JSON:
//
//	POST /v1/run            a Plan; 202 once started, 409 while another runs
//	GET  /v1/status?from=N  {"state", "intervals" (the seconds from index N on), "result", "error"}
//	POST /v1/cancel         stops the running plan
//
// The coordinator polls the status for its live progress line and takes the result (with its
// histograms) when the state is "done".
type Agent struct {
	mu struct {
		sync.Mutex
		state     string // "idle", "running", "done" or "failed"
		intervals []Interval
		result    *Result
		err       string
		cancel    context.CancelFunc
	}
	runs sync.WaitGroup
}

// AgentStatus is the answer to GET /v1/status.
type AgentStatus struct {
	State     string     `json:"state"`
	Intervals []Interval `json:"intervals"`
	Result    *Result    `json:"result,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// NewAgent returns an idle agent.
func NewAgent() *Agent {
	a := &Agent{}
	a.mu.state = "idle"
	return a
}

// Close cancels a running plan and waits for it.
func (a *Agent) Close() {
	a.mu.Lock()
	if a.mu.cancel != nil {
		a.mu.cancel()
	}
	a.mu.Unlock()
	a.runs.Wait()
}

// Handler serves the agent's API.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/run", a.serveRun)
	mux.HandleFunc("GET /v1/status", a.serveStatus)
	mux.HandleFunc("POST /v1/cancel", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		if a.mu.cancel != nil {
			a.mu.cancel()
		}
		a.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

func (a *Agent) serveRun(w http.ResponseWriter, r *http.Request) {
	var plan Plan
	if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&plan); err != nil {
		http.Error(w, "bench agent: bad plan: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := plan.Workload.Validate(); err != nil {
		http.Error(w, "bench agent: "+err.Error(), http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.state == "running" {
		http.Error(w, "bench agent: a run is in progress", http.StatusConflict)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.mu.state, a.mu.intervals, a.mu.result, a.mu.err, a.mu.cancel = "running", nil, nil, "", cancel
	a.runs.Add(1)
	go func() {
		defer a.runs.Done()
		defer cancel()
		result, err := Execute(ctx, plan, func(i Interval) {
			a.mu.Lock()
			a.mu.intervals = append(a.mu.intervals, i)
			a.mu.Unlock()
		})
		a.mu.Lock()
		defer a.mu.Unlock()
		a.mu.cancel = nil
		if err != nil {
			a.mu.state, a.mu.err = "failed", err.Error()
			return
		}
		a.mu.state, a.mu.result = "done", result
	}()
	w.WriteHeader(http.StatusAccepted)
}

func (a *Agent) serveStatus(w http.ResponseWriter, r *http.Request) {
	from, _ := strconv.Atoi(r.URL.Query().Get("from"))
	a.mu.Lock()
	status := AgentStatus{State: a.mu.state, Result: a.mu.result, Error: a.mu.err}
	if from >= 0 && from < len(a.mu.intervals) {
		status.Intervals = append(status.Intervals, a.mu.intervals[from:]...)
	}
	data, err := json.Marshal(status)
	a.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(data)
}

// RunOptions is one coordinated run.
type RunOptions struct {
	Workload Workload
	Driver   string
	Brokers  []string
	Agents   []string // host:port of agents; none: run in this process
	// TLS, when not nil, connects to the brokers through TLS (runs in this process only).
	TLS        *tls.Config
	KeepTopics bool
	Progress   Progress
}

// Run creates fresh topics, runs the workload (in this process, or spread over the agents with
// their results merged) and deletes the topics unless asked to keep them.
func Run(ctx context.Context, opts RunOptions) (*Result, error) {
	if err := opts.Workload.Validate(); err != nil {
		return nil, err
	}
	if opts.TLS != nil && len(opts.Agents) > 0 {
		return nil, fmt.Errorf("bench: TLS runs are not spread over agents yet; run without --agents")
	}
	admin, err := NewDriver(opts.Driver, opts.Brokers, opts.TLS)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	topics := TopicNames(opts.Workload)
	for _, topic := range topics {
		createCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := admin.CreateTopic(createCtx, topic, opts.Workload.Partitions, opts.Workload.ReplicationFactor, opts.Workload.TopicConfigs())
		cancel()
		if err != nil {
			return nil, fmt.Errorf("bench: create topic %s: %w", topic, err)
		}
	}
	if !opts.KeepTopics {
		defer func() {
			deleteCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, topic := range topics {
				admin.DeleteTopic(deleteCtx, topic)
			}
		}()
	}
	plan := FullPlan(opts.Workload, opts.Driver, opts.Brokers, topics)
	plan.TLS = opts.TLS
	if len(opts.Agents) == 0 {
		return Execute(ctx, plan, opts.Progress)
	}
	return runOnAgents(ctx, plan, opts.Agents, opts.Progress)
}

func runOnAgents(ctx context.Context, plan Plan, agents []string, progress Progress) (*Result, error) {
	httpClient := &http.Client{Timeout: 30 * time.Second}
	plans := plan.Split(len(agents))
	started := 0
	cancelAll := func() {
		for _, agent := range agents[:started] {
			cancelCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			req, _ := http.NewRequestWithContext(cancelCtx, http.MethodPost, "http://"+agent+"/v1/cancel", nil)
			if resp, err := httpClient.Do(req); err == nil {
				resp.Body.Close()
			}
			cancel()
		}
	}
	for i, agent := range agents {
		body, err := json.Marshal(plans[i])
		if err != nil {
			return nil, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+agent+"/v1/run", bytes.NewReader(body))
		if err != nil {
			cancelAll()
			return nil, fmt.Errorf("bench: agent %s: %w", agent, err)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			cancelAll()
			return nil, fmt.Errorf("bench: agent %s unreachable (is `sluice bench agent --listen %s` running?): %w", agent, agent, err)
		}
		message, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			cancelAll()
			return nil, fmt.Errorf("bench: agent %s refused the plan: %s", agent, bytes.TrimSpace(message))
		}
		started++
	}

	// Poll every agent; a second is reported once every agent has closed it.
	seen := make([][]Interval, len(agents))
	results := make([]*Result, len(agents))
	reported := 0
	ticker := time.NewTicker(250 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			cancelAll()
			return nil, ctx.Err()
		case <-ticker.C:
		}
		done := 0
		for i, agent := range agents {
			if results[i] != nil {
				done++
				continue
			}
			status, err := agentStatus(ctx, httpClient, agent, len(seen[i]))
			if err != nil {
				cancelAll()
				return nil, err
			}
			seen[i] = append(seen[i], status.Intervals...)
			switch status.State {
			case "failed":
				cancelAll()
				return nil, fmt.Errorf("bench: agent %s: %s", agent, status.Error)
			case "done":
				if status.Result == nil {
					return nil, fmt.Errorf("bench: agent %s finished without a result", agent)
				}
				results[i] = status.Result
				done++
			case "idle":
				return nil, fmt.Errorf("bench: agent %s lost the plan (restarted?)", agent)
			}
		}
		for progress != nil {
			common := reported
			var parts []*Result
			for i := range agents {
				if len(seen[i]) <= reported {
					common = -1
					break
				}
				parts = append(parts, &Result{Workload: plan.Workload, Timeline: seen[i][reported : reported+1]})
			}
			if common < 0 {
				break
			}
			progress(Merge(parts, nil).Timeline[0])
			reported++
		}
		if done == len(agents) {
			return Merge(results, agents), nil
		}
	}
}

func agentStatus(ctx context.Context, httpClient *http.Client, agent string, from int) (*AgentStatus, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/v1/status?from=%d", agent, from), nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bench: agent %s: %w", agent, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench: agent %s: status %s", agent, resp.Status)
	}
	var status AgentStatus
	if err := json.NewDecoder(resp.Body).Decode(&status); err != nil {
		return nil, fmt.Errorf("bench: agent %s: %w", agent, err)
	}
	return &status, nil
}
