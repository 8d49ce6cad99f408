package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const clusterHelp = `Usage: sluice cluster status|elect-leaders [flags]

  status         brokers (alive or fenced), the controller, under-replicated and offline partitions,
                 and every partition with its leader, epoch, replicas and in-sync replicas
  elect-leaders  move leadership back to each partition's preferred replica where it is in sync
`

type clusterStatus struct {
	ClusterID    string          `json:"cluster_id"`
	ControllerID int32           `json:"controller_id"`
	Brokers      []clusterBroker `json:"brokers"`
	// UnderReplicated counts partitions whose ISR is smaller than their replica set; Offline those
	// without a leader.
	UnderReplicated int                `json:"under_replicated"`
	Offline         int                `json:"offline"`
	Partitions      []clusterPartition `json:"partitions"`
}

type clusterBroker struct {
	NodeID     int32  `json:"node_id"`
	Address    string `json:"address"`
	Rack       string `json:"rack,omitempty"`
	Controller bool   `json:"controller"`
	// State is "alive" for brokers metadata lists, "fenced" for replicas it does not (fenced
	// brokers are left out of metadata answers).
	State string `json:"state"`
}

type clusterPartition struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	Epoch     int32   `json:"leader_epoch"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
	Error     string  `json:"error,omitempty"`
}

func runCluster(ctx context.Context, args []string, io streams) error {
	verb, rest, err := subcommand("cluster", args, []string{"status", "elect-leaders"}, io, clusterHelp)
	if err != nil {
		return err
	}
	if verb == "elect-leaders" {
		return clusterElectLeaders(ctx, rest, io)
	}
	fs := newFlags("sluice cluster status", "[flags]", "The cluster as metadata shows it: brokers, the controller, and every partition with its leader and in-sync replicas.")
	internal := fs.Bool("internal", false, "include internal topics")
	if _, err := fs.parse(rest, io.out, 0, 0); err != nil {
		return err
	}
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	req := kmsg.NewPtrMetadataRequest() // Topics nil: all topics
	resp, err := req.RequestWith(rctx, s.raw)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	status := clusterStatus{ControllerID: resp.ControllerID, Brokers: []clusterBroker{}, Partitions: []clusterPartition{}}
	if resp.ClusterID != nil {
		status.ClusterID = *resp.ClusterID
	}
	for _, b := range resp.Brokers {
		broker := clusterBroker{NodeID: b.NodeID, Address: fmt.Sprintf("%s:%d", b.Host, b.Port), Controller: b.NodeID == resp.ControllerID, State: "alive"}
		if b.Rack != nil {
			broker.Rack = *b.Rack
		}
		status.Brokers = append(status.Brokers, broker)
	}
	listed := map[int32]bool{}
	for _, b := range status.Brokers {
		listed[b.NodeID] = true
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || (t.IsInternal && !*internal) {
			continue
		}
		for _, p := range t.Partitions {
			row := clusterPartition{Topic: *t.Topic, Partition: p.Partition, Leader: p.Leader, Epoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR}
			for _, id := range p.Replicas {
				if !listed[id] {
					listed[id] = true
					status.Brokers = append(status.Brokers, clusterBroker{NodeID: id, State: "fenced"})
				}
			}
			if p.Leader < 0 {
				status.Offline++
			} else if len(p.ISR) < len(p.Replicas) {
				status.UnderReplicated++
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				row.Error = err.Error()
			}
			status.Partitions = append(status.Partitions, row)
		}
	}
	sort.Slice(status.Brokers, func(i, j int) bool { return status.Brokers[i].NodeID < status.Brokers[j].NodeID })
	sort.Slice(status.Partitions, func(i, j int) bool {
		a, b := status.Partitions[i], status.Partitions[j]
		return a.Topic < b.Topic || (a.Topic == b.Topic && a.Partition < b.Partition)
	})
	if fs.globals.json {
		return writeJSON(io.out, status)
	}
	fmt.Fprintf(io.out, "cluster %s, controller %d, %d broker(s), %d partition(s): %d under-replicated, %d offline\n\n",
		status.ClusterID, status.ControllerID, len(status.Brokers), len(status.Partitions), status.UnderReplicated, status.Offline)
	t := newTable(io.out, "node", "state", "address", "rack", "controller")
	for _, b := range status.Brokers {
		controller := ""
		if b.Controller {
			controller = "yes"
		}
		t.row(b.NodeID, b.State, b.Address, b.Rack, controller)
	}
	t.flush()
	if len(status.Partitions) > 0 {
		fmt.Fprintln(io.out)
		t := newTable(io.out, "topic", "partition", "leader", "epoch", "replicas", "isr", "error")
		for _, p := range status.Partitions {
			t.row(p.Topic, p.Partition, p.Leader, p.Epoch, int32List(p.Replicas), int32List(p.ISR), p.Error)
		}
		t.flush()
	}
	return nil
}

type electionOutcome struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Result    string `json:"result"`
}

func clusterElectLeaders(ctx context.Context, args []string, io streams) error {
	fs := newFlags("sluice cluster elect-leaders", "[TOPIC[:PARTITION]...] [flags]", `Preferred-leader election (Kafka's ElectLeaders): each named partition, or every partition when
none is named, is led again by its preferred replica (the first listed) if that replica is in sync.
Without names only the partitions whose leader moved are listed.`)
	positional, err := fs.parse(args, io.out, 0, -1)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrElectLeadersRequest()
	req.TimeoutMillis = 30_000
	if len(positional) > 0 {
		byTopic := map[string]int{}
		for _, arg := range positional {
			topic, partitionText, hasPartition := strings.Cut(arg, ":")
			i, ok := byTopic[topic]
			if !ok {
				rt := kmsg.NewElectLeadersRequestTopic()
				rt.Topic = topic
				req.Topics = append(req.Topics, rt)
				i = len(req.Topics) - 1
				byTopic[topic] = i
			}
			if hasPartition {
				p, err := strconv.ParseInt(partitionText, 10, 32)
				if err != nil {
					return usageErrorf("sluice cluster elect-leaders", "partition in %q: %v", arg, err)
				}
				req.Topics[i].Partitions = append(req.Topics[i].Partitions, int32(p))
			}
		}
	}
	s, rctx, done, err := open(ctx, fs.globals)
	if err != nil {
		return err
	}
	defer done()
	// A topic named without partitions means all of its partitions.
	if len(req.Topics) > 0 {
		meta := kmsg.NewPtrMetadataRequest()
		for _, rt := range req.Topics {
			if len(rt.Partitions) == 0 {
				mt := kmsg.NewMetadataRequestTopic()
				mt.Topic = kmsg.StringPtr(rt.Topic)
				meta.Topics = append(meta.Topics, mt)
			}
		}
		if len(meta.Topics) > 0 {
			resp, err := meta.RequestWith(rctx, s.raw)
			if err != nil {
				return fmt.Errorf("metadata: %w", err)
			}
			for _, t := range resp.Topics {
				if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
					return fmt.Errorf("topic %s: %w", derefName(t.Topic), err)
				}
				for i := range req.Topics {
					if req.Topics[i].Topic == derefName(t.Topic) && len(req.Topics[i].Partitions) == 0 {
						for _, p := range t.Partitions {
							req.Topics[i].Partitions = append(req.Topics[i].Partitions, p.Partition)
						}
					}
				}
			}
		}
	}
	resp, err := req.RequestWith(rctx, s.raw)
	if err != nil {
		return fmt.Errorf("elect leaders: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("elect leaders: %w", err)
	}
	outcomes := []electionOutcome{}
	failed := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			result := "elected"
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				result = err.Error()
				if p.ErrorCode != kerr.ElectionNotNeeded.Code {
					failed++
				}
			}
			outcomes = append(outcomes, electionOutcome{Topic: t.Topic, Partition: p.Partition, Result: result})
		}
	}
	sort.Slice(outcomes, func(i, j int) bool {
		a, b := outcomes[i], outcomes[j]
		return a.Topic < b.Topic || (a.Topic == b.Topic && a.Partition < b.Partition)
	})
	if fs.globals.json {
		if err := writeJSON(io.out, outcomes); err != nil {
			return err
		}
	} else {
		t := newTable(io.out, "topic", "partition", "result")
		for _, o := range outcomes {
			t.row(o.Topic, o.Partition, o.Result)
		}
		t.flush()
	}
	if failed > 0 {
		return fmt.Errorf("elect leaders: %d partition(s) could not be elected", failed)
	}
	return nil
}

func derefName(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
