package main

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const clusterHelp = `Usage: sluice cluster status [flags]

The cluster as metadata shows it: brokers, the controller, and every partition with its leader.
`

type clusterStatus struct {
	ClusterID    string             `json:"cluster_id"`
	ControllerID int32              `json:"controller_id"`
	Brokers      []clusterBroker    `json:"brokers"`
	Partitions   []clusterPartition `json:"partitions"`
}

type clusterBroker struct {
	NodeID     int32  `json:"node_id"`
	Address    string `json:"address"`
	Rack       string `json:"rack,omitempty"`
	Controller bool   `json:"controller"`
}

type clusterPartition struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
	Error     string  `json:"error,omitempty"`
}

func runCluster(ctx context.Context, args []string, io streams) error {
	_, rest, err := subcommand("cluster", args, []string{"status"}, io, clusterHelp)
	if err != nil {
		return err
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
		broker := clusterBroker{NodeID: b.NodeID, Address: fmt.Sprintf("%s:%d", b.Host, b.Port), Controller: b.NodeID == resp.ControllerID}
		if b.Rack != nil {
			broker.Rack = *b.Rack
		}
		status.Brokers = append(status.Brokers, broker)
	}
	sort.Slice(status.Brokers, func(i, j int) bool { return status.Brokers[i].NodeID < status.Brokers[j].NodeID })
	for _, t := range resp.Topics {
		if t.Topic == nil || (t.IsInternal && !*internal) {
			continue
		}
		for _, p := range t.Partitions {
			row := clusterPartition{Topic: *t.Topic, Partition: p.Partition, Leader: p.Leader, Replicas: p.Replicas, ISR: p.ISR}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				row.Error = err.Error()
			}
			status.Partitions = append(status.Partitions, row)
		}
	}
	sort.Slice(status.Partitions, func(i, j int) bool {
		a, b := status.Partitions[i], status.Partitions[j]
		return a.Topic < b.Topic || (a.Topic == b.Topic && a.Partition < b.Partition)
	})
	if fs.globals.json {
		return writeJSON(io.out, status)
	}
	fmt.Fprintf(io.out, "cluster %s, controller %d, %d broker(s), %d partition(s)\n\n", status.ClusterID, status.ControllerID, len(status.Brokers), len(status.Partitions))
	t := newTable(io.out, "node", "address", "rack", "controller")
	for _, b := range status.Brokers {
		controller := ""
		if b.Controller {
			controller = "yes"
		}
		t.row(b.NodeID, b.Address, b.Rack, controller)
	}
	t.flush()
	if len(status.Partitions) > 0 {
		fmt.Fprintln(io.out)
		t := newTable(io.out, "topic", "partition", "leader", "replicas", "isr", "error")
		for _, p := range status.Partitions {
			t.row(p.Topic, p.Partition, p.Leader, int32List(p.Replicas), int32List(p.ISR), p.Error)
		}
		t.flush()
	}
	return nil
}
