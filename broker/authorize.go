package broker

// Authorization: before a request reaches its handler, the rule for its API (authorizationRules)
// checks what Kafka's authorizer checks for it (Kafka's "Authorization and ACLs" operation table,
// KIP-11) against the replicated ACLs. A check on one resource of the whole request (the group of
// a JoinGroup, the transactional id of an EndTxn, the cluster for admin APIs) answers the whole
// request with the matching *_AUTHORIZATION_FAILED code. A check per topic (Produce, Fetch,
// OffsetCommit, ...) takes the refused topics out of the request, lets the handler serve the rest,
// and adds the refused ones back to the response with TOPIC_AUTHORIZATION_FAILED (request.amend);
// Metadata, ListGroups and ListTransactions leave out what the principal may not describe.
//
// Inter-broker requests (follower fetches, OffsetForLeaderEpoch with a replica id,
// WriteTxnMarkers) need CLUSTER_ACTION on the cluster: brokers authenticate as a super user or as
// a principal granted it. Every served API has a rule (a test checks); none means no check.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/acl"
	"github.com/sluice-mq/sluice/protocol"
)

// authorization is one request's authorization context.
type authorization struct {
	b         *Broker
	r         *request
	principal string
	host      string
	acls      *acl.Set
}

// rule checks one API's request; false means it was answered (refused) and must not be handled.
type rule func(z *authorization, req kmsg.Request) bool

// authorizeRequest runs the rule of r's API. It reports whether the handler should run.
func (b *Broker) authorizeRequest(r *request, req kmsg.Request) bool {
	if !b.security.enabled {
		return true
	}
	check, ok := authorizationRules[req.Key()]
	if !ok {
		b.closeFor(r, "no authorization rule for this api") // unreachable: a test checks every served API has one
		return false
	}
	if check == nil {
		return true
	}
	z := &authorization{b: b, r: r, principal: r.session.principal(), host: hostOf(r.session.conn.RemoteAddr()),
		acls: b.coordinator.Security().ACLs}
	return check(z, req)
}

// allowed decides one operation on one resource.
func (z *authorization) allowed(op acl.Operation, rt acl.ResourceType, name string) bool {
	return z.b.security.authorizer.Authorize(z.acls, acl.Request{Principal: z.principal, Host: z.host, Operation: op,
		ResourceType: rt, ResourceName: name})
}

func (z *authorization) cluster(op acl.Operation) bool {
	return z.allowed(op, acl.ResourceCluster, acl.ClusterName)
}

func (z *authorization) topicName(id [16]byte) string {
	name, _ := z.b.registry.topicName(id)
	return name
}

// refuse answers the whole request with code: at the top level where the response carries one at
// the request's version, and in every topic and group the request names.
func (z *authorization) refuse(req kmsg.Request, code protocol.ErrorCode) bool {
	z.b.security.refusals.Inc()
	resp := req.ResponseKind()
	setTopLevelError(resp, req.GetVersion(), code.Code)
	if topics, ok := topicsOf(req, z.topicName); ok {
		appendTopicErrors(resp, topics, code.Code)
	}
	if groups := groupListField(req); groups.IsValid() {
		var names []string
		for i := range groups.Len() {
			names = append(names, groupNameOf(groups.Index(i)))
		}
		appendGroupErrors(resp, names, code.Code)
	}
	refusalItems(req, resp, code.Code)
	z.r.failed()
	if produce, ok := req.(*kmsg.ProduceRequest); ok && produce.Acks == 0 {
		z.r.skip()
		return false
	}
	z.r.respond(resp)
	return false
}

// filterTopics takes the topics allow refuses out of the request; the response gets them back
// answering code. Topics named by an id this broker does not know pass: the handler answers
// UNKNOWN_TOPIC_ID.
func (z *authorization) filterTopics(req kmsg.Request, code protocol.ErrorCode, allow func(name string) bool) []requestTopic {
	topics, ok := topicsOf(req, z.topicName)
	if !ok {
		return nil
	}
	keep := make([]bool, len(topics))
	var denied []requestTopic
	for i, t := range topics {
		keep[i] = t.name == "" || allow(t.name)
		if !keep[i] {
			denied = append(denied, t)
		}
	}
	if len(denied) == 0 {
		return nil
	}
	z.b.security.refusals.Inc()
	keepTopics(req, keep)
	z.r.amend = append(z.r.amend, func(resp kmsg.Response) { appendTopicErrors(resp, denied, code.Code) })
	return denied
}

// topicsRule checks op on every topic of the request.
func topicsRule(op acl.Operation) rule {
	return func(z *authorization, req kmsg.Request) bool {
		z.filterTopics(req, protocol.TopicAuthorizationFailed, func(name string) bool { return z.allowed(op, acl.ResourceTopic, name) })
		return true
	}
}

// clusterRule checks op on the cluster.
func clusterRule(op acl.Operation) rule {
	return func(z *authorization, req kmsg.Request) bool {
		return z.cluster(op) || z.refuse(req, protocol.ClusterAuthorizationFailed)
	}
}

// groupRule checks op on the request's group.
func groupRule(op acl.Operation) rule {
	return func(z *authorization, req kmsg.Request) bool {
		group, _ := groupOf(req)
		return z.allowed(op, acl.ResourceGroup, group) || z.refuse(req, protocol.GroupAuthorizationFailed)
	}
}

// transactionRule checks op on the request's transactional id, if it has one.
func transactionRule(op acl.Operation) rule {
	return func(z *authorization, req kmsg.Request) bool {
		id := transactionalIDOf(req)
		return id == "" || z.allowed(op, acl.ResourceTransactionalID, id) || z.refuse(req, protocol.TransactionalIDAuthorizationFailed)
	}
}

// all runs rules in order until one refuses.
func all(rules ...rule) rule {
	return func(z *authorization, req kmsg.Request) bool {
		for _, check := range rules {
			if !check(z, req) {
				return false
			}
		}
		return true
	}
}

// authorizationRules maps every served API key to its rule; nil: no check (Kafka has none).
var authorizationRules = map[int16]rule{
	0:  all(transactionRule(acl.OperationWrite), topicsRule(acl.OperationWrite)), // Produce
	1:  authorizeFetch,
	2:  topicsRule(acl.OperationDescribe), // ListOffsets
	3:  withAuthorizedOperations(authorizeMetadata),
	8:  all(groupRule(acl.OperationRead), topicsRule(acl.OperationRead)), // OffsetCommit
	9:  authorizeOffsetFetch,
	10: authorizeFindCoordinator,
	11: groupRule(acl.OperationRead), // JoinGroup
	12: groupRule(acl.OperationRead), // Heartbeat
	13: groupRule(acl.OperationRead), // LeaveGroup
	14: groupRule(acl.OperationRead), // SyncGroup
	15: withAuthorizedOperations(groupsRule(acl.OperationDescribe)),
	16: authorizeListGroups,
	17: nil, // SaslHandshake
	18: nil, // ApiVersions
	19: authorizeCreateTopics,
	20: authorizeDeleteTopics,
	21: topicsRule(acl.OperationDelete), // DeleteRecords
	22: authorizeInitProducerID,
	23: authorizeOffsetForLeaderEpoch,
	24: authorizeAddPartitionsToTxn,
	25: all(transactionRule(acl.OperationWrite), groupRule(acl.OperationRead)),                                // AddOffsetsToTxn
	26: transactionRule(acl.OperationWrite),                                                                   // EndTxn
	27: clusterRule(acl.OperationClusterAction),                                                               // WriteTxnMarkers
	28: all(transactionRule(acl.OperationWrite), groupRule(acl.OperationRead), topicsRule(acl.OperationRead)), // TxnOffsetCommit
	29: clusterRule(acl.OperationDescribe),                                                                    // DescribeAcls
	30: clusterRule(acl.OperationAlter),                                                                       // CreateAcls
	31: clusterRule(acl.OperationAlter),                                                                       // DeleteAcls
	32: configResourcesRule(acl.OperationDescribeConfigs),
	33: configResourcesRule(acl.OperationAlterConfigs),
	35: clusterRule(acl.OperationDescribe), // DescribeLogDirs
	36: nil,                                // SaslAuthenticate
	37: topicsRule(acl.OperationAlter),     // CreatePartitions
	42: groupsRule(acl.OperationDelete),    // DeleteGroups
	43: clusterRule(acl.OperationAlter),    // ElectLeaders
	44: configResourcesRule(acl.OperationAlterConfigs),
	47: all(groupRule(acl.OperationDelete), topicsRule(acl.OperationRead)), // OffsetDelete
	48: clusterRule(acl.OperationDescribeConfigs),                          // DescribeClientQuotas
	49: clusterRule(acl.OperationAlterConfigs),                             // AlterClientQuotas
	50: clusterRule(acl.OperationDescribe),                                 // DescribeUserScramCredentials
	51: clusterRule(acl.OperationAlter),                                    // AlterUserScramCredentials
	60: withAuthorizedOperations(nil),                                      // DescribeCluster: Kafka checks nothing; answers authorized operations
	61: topicsRule(acl.OperationRead),                                      // DescribeProducers
	65: authorizeDescribeTransactions,
	66: authorizeListTransactions,
	68: groupRule(acl.OperationRead), // ConsumerGroupHeartbeat
	69: withAuthorizedOperations(groupsRule(acl.OperationDescribe)),
	76: groupRule(acl.OperationRead), // ShareGroupHeartbeat
	77: withAuthorizedOperations(groupsRule(acl.OperationDescribe)),
	78: all(groupRule(acl.OperationRead), topicsRule(acl.OperationRead)),   // ShareFetch
	79: all(groupRule(acl.OperationRead), topicsRule(acl.OperationRead)),   // ShareAcknowledge
	90: groupsRule(acl.OperationDescribe),                                  // DescribeShareGroupOffsets
	91: all(groupRule(acl.OperationRead), topicsRule(acl.OperationRead)),   // AlterShareGroupOffsets
	92: all(groupRule(acl.OperationDelete), topicsRule(acl.OperationRead)), // DeleteShareGroupOffsets
}

// refusalItems fills the per-item answers of responses that carry no top-level error code, so a
// whole-request refusal shows on every item the request named.
func refusalItems(req kmsg.Request, resp kmsg.Response, code int16) {
	switch req := req.(type) {
	case *kmsg.CreateACLsRequest:
		r := resp.(*kmsg.CreateACLsResponse)
		for range req.Creations {
			result := kmsg.NewCreateACLsResponseResult()
			result.ErrorCode = code
			r.Results = append(r.Results, result)
		}
	case *kmsg.DeleteACLsRequest:
		r := resp.(*kmsg.DeleteACLsResponse)
		for range req.Filters {
			result := kmsg.NewDeleteACLsResponseResult()
			result.ErrorCode = code
			r.Results = append(r.Results, result)
		}
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		r := resp.(*kmsg.AlterUserSCRAMCredentialsResponse)
		seen := map[string]bool{}
		for _, name := range append(namesOfDeletions(req.Deletions), namesOfUpsertions(req.Upsertions)...) {
			if !seen[name] {
				seen[name] = true
				result := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				result.User, result.ErrorCode = name, code
				r.Results = append(r.Results, result)
			}
		}
	case *kmsg.AlterClientQuotasRequest:
		r := resp.(*kmsg.AlterClientQuotasResponse)
		for _, e := range req.Entries {
			entry := kmsg.NewAlterClientQuotasResponseEntry()
			entry.ErrorCode = code
			for _, part := range e.Entity {
				entity := kmsg.NewAlterClientQuotasResponseEntryEntity()
				entity.Type, entity.Name = part.Type, part.Name
				entry.Entity = append(entry.Entity, entity)
			}
			r.Entries = append(r.Entries, entry)
		}
	case *kmsg.WriteTxnMarkersRequest:
		r := resp.(*kmsg.WriteTxnMarkersResponse)
		for _, m := range req.Markers {
			marker := kmsg.NewWriteTxnMarkersResponseMarker()
			marker.ProducerID = m.ProducerID
			for _, t := range m.Topics {
				topic := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				topic.Topic = t.Topic
				for _, p := range t.Partitions {
					partition := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					partition.Partition, partition.ErrorCode = p, code
					topic.Partitions = append(topic.Partitions, partition)
				}
				marker.Topics = append(marker.Topics, topic)
			}
			r.Markers = append(r.Markers, marker)
		}
	}
}

func namesOfDeletions(items []kmsg.AlterUserSCRAMCredentialsRequestDeletion) []string {
	var out []string
	for _, d := range items {
		out = append(out, d.Name)
	}
	return out
}

func namesOfUpsertions(items []kmsg.AlterUserSCRAMCredentialsRequestUpsertion) []string {
	var out []string
	for _, u := range items {
		out = append(out, u.Name)
	}
	return out
}
