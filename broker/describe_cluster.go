package broker

// DescribeCluster v0-v1: cluster id, controller id and the registered brokers. v1 endpoint type 1
// (brokers) is served; asking for controllers (2) gets UNSUPPORTED_VERSION, as from a Kafka broker.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/protocol"
)

func (b *Broker) handleDescribeCluster(r *request, req *kmsg.DescribeClusterRequest) {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = protocol.UnsupportedVersion.Code
		resp.EndpointType = req.EndpointType
		r.failed()
		r.respond(resp)
		return
	}
	meta := b.coordinator.Metadata()
	resp.ClusterID = meta.ClusterID
	resp.ControllerID = meta.ControllerID
	resp.EndpointType = 1
	for _, id := range meta.BrokerIDs() {
		broker := meta.Brokers[id]
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID = broker.NodeID
		rb.Host, rb.Port = b.endpointFor(r, broker)
		if broker.Rack != "" {
			rack := broker.Rack
			rb.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	r.respond(resp)
}
