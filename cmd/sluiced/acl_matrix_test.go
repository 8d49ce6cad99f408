package main

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/acl"
	"github.com/sluice-mq/sluice/client"
)

var authorizationCodes = []int16{29, 30, 31, 53}

// TestACLMatrix: for every API the broker serves with a check, a principal without the ACL it
// needs is refused with the right *_AUTHORIZATION_FAILED code, and one granted exactly that ACL
// (nothing more) gets past authorization. Then literal against prefixed patterns and deny over
// allow, and Metadata, ListGroups and ListTransactions hiding what a principal may not describe.
func TestACLMatrix(t *testing.T) {
	d := startSecureDaemon(t, map[string]string{"admin": "admin-secret", "granted": "g", "nobody": "n"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := repoClient(t, d.kafka, client.SASLPlain, "admin", "admin-secret")
	adminAPI := client.NewAdmin(admin)
	for _, name := range []string{"m.topic", "m.delete", "m.hidden"} {
		if err := adminAPI.CreateTopics(ctx, client.TopicSpec{Name: name, Partitions: 1, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
	}
	metadata := kmsg.NewPtrMetadataRequest()
	topicID := dialSASL(t, d.kafka, "admin", "admin-secret").do(metadata).(*kmsg.MetadataResponse).Topics
	var mTopicID [16]byte
	for _, topic := range topicID {
		if topic.Topic != nil && *topic.Topic == "m.topic" {
			mTopicID = topic.TopicID
		}
	}
	granted := dialSASL(t, d.kafka, "granted", "g")
	nobody := dialSASL(t, d.kafka, "nobody", "n")

	const (
		topicCode   = 29
		groupCode   = 30
		clusterCode = 31
		txnCode     = 53
	)
	topic := func(op acl.Operation) acl.Binding {
		return allowBinding("User:granted", op, acl.ResourceTopic, "m.topic", acl.PatternLiteral)
	}
	group := func(op acl.Operation) acl.Binding {
		return allowBinding("User:granted", op, acl.ResourceGroup, "m.group", acl.PatternLiteral)
	}
	txn := func(op acl.Operation) acl.Binding {
		return allowBinding("User:granted", op, acl.ResourceTransactionalID, "m.txn", acl.PatternLiteral)
	}
	cluster := func(op acl.Operation) acl.Binding {
		return allowBinding("User:granted", op, acl.ResourceCluster, acl.ClusterName, acl.PatternLiteral)
	}
	type matrixCase struct {
		name  string
		grant []acl.Binding
		code  int16
		build func() kmsg.Request
	}
	offsetCommitTopics := func() []kmsg.OffsetCommitRequestTopic {
		tp := kmsg.NewOffsetCommitRequestTopic()
		tp.Topic = "m.topic"
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		tp.Partitions = append(tp.Partitions, p)
		return []kmsg.OffsetCommitRequestTopic{tp}
	}
	cases := []matrixCase{
		{"Produce", []acl.Binding{topic(acl.OperationWrite)}, topicCode, func() kmsg.Request {
			r := kmsg.NewPtrProduceRequest()
			r.Version, r.Acks, r.TimeoutMillis = 9, 1, 5000
			tp := kmsg.NewProduceRequestTopic()
			tp.Topic = "m.topic"
			tp.Partitions = append(tp.Partitions, kmsg.NewProduceRequestTopicPartition())
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"Fetch", []acl.Binding{topic(acl.OperationRead)}, topicCode, func() kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.Version, r.MaxWaitMillis, r.MaxBytes = 12, 0, 1<<20
			tp := kmsg.NewFetchRequestTopic()
			tp.Topic = "m.topic"
			p := kmsg.NewFetchRequestTopicPartition()
			p.PartitionMaxBytes = 1 << 20
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"Fetch by topic id", []acl.Binding{topic(acl.OperationRead)}, topicCode, func() kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.Version, r.MaxWaitMillis, r.MaxBytes = 13, 0, 1<<20
			tp := kmsg.NewFetchRequestTopic()
			tp.TopicID = mTopicID
			p := kmsg.NewFetchRequestTopicPartition()
			p.PartitionMaxBytes = 1 << 20
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"Fetch as a follower", []acl.Binding{cluster(acl.OperationClusterAction)}, topicCode, func() kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.Version, r.ReplicaID, r.MaxBytes = 12, 1, 1<<20
			tp := kmsg.NewFetchRequestTopic()
			tp.Topic = "m.topic"
			p := kmsg.NewFetchRequestTopicPartition()
			p.PartitionMaxBytes = 1 << 20
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"ListOffsets", []acl.Binding{topic(acl.OperationDescribe)}, topicCode, func() kmsg.Request {
			r := kmsg.NewPtrListOffsetsRequest()
			tp := kmsg.NewListOffsetsRequestTopic()
			tp.Topic = "m.topic"
			p := kmsg.NewListOffsetsRequestTopicPartition()
			p.Timestamp = -1
			tp.Partitions = append(tp.Partitions, p)
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"Metadata", []acl.Binding{topic(acl.OperationDescribe)}, topicCode, func() kmsg.Request {
			r := kmsg.NewPtrMetadataRequest()
			tp := kmsg.NewMetadataRequestTopic()
			tp.Topic = kmsg.StringPtr("m.topic")
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"Metadata auto-create", []acl.Binding{allowBinding("User:granted", acl.OperationCreate, acl.ResourceTopic, "m.auto", acl.PatternLiteral),
			allowBinding("User:granted", acl.OperationDescribe, acl.ResourceTopic, "m.auto", acl.PatternLiteral)}, topicCode, func() kmsg.Request {
			r := kmsg.NewPtrMetadataRequest()
			r.AllowAutoTopicCreation = true
			tp := kmsg.NewMetadataRequestTopic()
			tp.Topic = kmsg.StringPtr("m.auto")
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"OffsetCommit", []acl.Binding{group(acl.OperationRead), topic(acl.OperationRead)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrOffsetCommitRequest()
			r.Version, r.Group, r.Generation = 8, "m.group", -1
			r.Topics = offsetCommitTopics()
			return r
		}},
		{"OffsetFetch", []acl.Binding{group(acl.OperationDescribe)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			r.Version, r.Group = 7, "m.group"
			return r
		}},
		{"OffsetFetch v8", []acl.Binding{group(acl.OperationDescribe)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			r.Version = 8
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group = "m.group"
			r.Groups = append(r.Groups, g)
			return r
		}},
		{"FindCoordinator", []acl.Binding{group(acl.OperationDescribe)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.CoordinatorKeys = []string{"m.group"}
			return r
		}},
		{"FindCoordinator v3 transaction", []acl.Binding{txn(acl.OperationDescribe)}, txnCode, func() kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.Version, r.CoordinatorKey, r.CoordinatorType = 3, "m.txn", 1
			return r
		}},
		{"JoinGroup", []acl.Binding{group(acl.OperationRead)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrJoinGroupRequest()
			r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.ProtocolType = "m.group", 10000, 10000, "consumer"
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name = "range"
			r.Protocols = append(r.Protocols, p)
			return r
		}},
		{"Heartbeat", []acl.Binding{group(acl.OperationRead)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Group, r.MemberID = "m.group", "x"
			return r
		}},
		{"LeaveGroup", []acl.Binding{group(acl.OperationRead)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrLeaveGroupRequest()
			r.Group = "m.group"
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID = "x"
			r.Members = append(r.Members, m)
			return r
		}},
		{"SyncGroup", []acl.Binding{group(acl.OperationRead)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrSyncGroupRequest()
			r.Group, r.MemberID, r.ProtocolType, r.Protocol = "m.group", "x", kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
			return r
		}},
		{"DescribeGroups", []acl.Binding{group(acl.OperationDescribe)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrDescribeGroupsRequest()
			r.Groups = []string{"m.group"}
			return r
		}},
		{"CreateTopics", []acl.Binding{allowBinding("User:granted", acl.OperationCreate, acl.ResourceTopic, "m.created", acl.PatternLiteral)}, topicCode, func() kmsg.Request {
			r := kmsg.NewPtrCreateTopicsRequest()
			tp := kmsg.NewCreateTopicsRequestTopic()
			tp.Topic, tp.NumPartitions, tp.ReplicationFactor = "m.created", 1, 1
			r.Topics, r.TimeoutMillis = append(r.Topics, tp), 10000
			return r
		}},
		{"DeleteTopics", []acl.Binding{allowBinding("User:granted", acl.OperationDelete, acl.ResourceTopic, "m.delete", acl.PatternLiteral)}, topicCode, func() kmsg.Request {
			r := kmsg.NewPtrDeleteTopicsRequest()
			r.Version, r.TopicNames, r.TimeoutMillis = 5, []string{"m.delete"}, 10000
			return r
		}},
		{"DeleteRecords", []acl.Binding{topic(acl.OperationDelete)}, topicCode, func() kmsg.Request {
			r := kmsg.NewPtrDeleteRecordsRequest()
			tp := kmsg.NewDeleteRecordsRequestTopic()
			tp.Topic = "m.topic"
			tp.Partitions = append(tp.Partitions, kmsg.NewDeleteRecordsRequestTopicPartition())
			r.Topics, r.TimeoutMillis = append(r.Topics, tp), 5000
			return r
		}},
		{"InitProducerId idempotent", []acl.Binding{cluster(acl.OperationIdempotentWrite)}, clusterCode, func() kmsg.Request {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.TransactionTimeoutMillis = -1
			return r
		}},
		{"InitProducerId idempotent by topic WRITE", []acl.Binding{topic(acl.OperationWrite)}, clusterCode, func() kmsg.Request {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.TransactionTimeoutMillis = -1
			return r
		}},
		{"InitProducerId transactional", []acl.Binding{txn(acl.OperationWrite)}, txnCode, func() kmsg.Request {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.TransactionalID, r.TransactionTimeoutMillis = kmsg.StringPtr("m.txn"), 10000
			return r
		}},
		{"OffsetForLeaderEpoch", []acl.Binding{topic(acl.OperationDescribe)}, topicCode, func() kmsg.Request {
			r := kmsg.NewPtrOffsetForLeaderEpochRequest()
			r.ReplicaID = -1
			tp := kmsg.NewOffsetForLeaderEpochRequestTopic()
			tp.Topic = "m.topic"
			tp.Partitions = append(tp.Partitions, kmsg.NewOffsetForLeaderEpochRequestTopicPartition())
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"AddPartitionsToTxn", []acl.Binding{txn(acl.OperationWrite), topic(acl.OperationWrite)}, txnCode, func() kmsg.Request {
			r := kmsg.NewPtrAddPartitionsToTxnRequest()
			r.Version, r.TransactionalID = 3, "m.txn"
			tp := kmsg.NewAddPartitionsToTxnRequestTopic()
			tp.Topic, tp.Partitions = "m.topic", []int32{0}
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"AddPartitionsToTxn topic", []acl.Binding{txn(acl.OperationWrite), topic(acl.OperationWrite)}, topicCode, func() kmsg.Request {
			r := kmsg.NewPtrAddPartitionsToTxnRequest() // nobody gets txnCode first; see the topic-only check below
			r.Version, r.TransactionalID = 3, "m.txn"
			tp := kmsg.NewAddPartitionsToTxnRequestTopic()
			tp.Topic, tp.Partitions = "m.topic", []int32{0}
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"AddOffsetsToTxn", []acl.Binding{txn(acl.OperationWrite), group(acl.OperationRead)}, txnCode, func() kmsg.Request {
			r := kmsg.NewPtrAddOffsetsToTxnRequest()
			r.TransactionalID, r.Group = "m.txn", "m.group"
			return r
		}},
		{"EndTxn", []acl.Binding{txn(acl.OperationWrite)}, txnCode, func() kmsg.Request {
			r := kmsg.NewPtrEndTxnRequest()
			r.TransactionalID = "m.txn"
			return r
		}},
		{"WriteTxnMarkers", []acl.Binding{cluster(acl.OperationClusterAction)}, clusterCode, func() kmsg.Request {
			r := kmsg.NewPtrWriteTxnMarkersRequest()
			m := kmsg.NewWriteTxnMarkersRequestMarker()
			m.ProducerID = 999
			tp := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			tp.Topic, tp.Partitions = "m.topic", []int32{0}
			m.Topics = append(m.Topics, tp)
			r.Markers = append(r.Markers, m)
			return r
		}},
		{"TxnOffsetCommit", []acl.Binding{txn(acl.OperationWrite), group(acl.OperationRead), topic(acl.OperationRead)}, txnCode, func() kmsg.Request {
			r := kmsg.NewPtrTxnOffsetCommitRequest()
			r.TransactionalID, r.Group = "m.txn", "m.group"
			tp := kmsg.NewTxnOffsetCommitRequestTopic()
			tp.Topic = "m.topic"
			tp.Partitions = append(tp.Partitions, kmsg.NewTxnOffsetCommitRequestTopicPartition())
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"DescribeAcls", []acl.Binding{cluster(acl.OperationDescribe)}, clusterCode, func() kmsg.Request {
			r := kmsg.NewPtrDescribeACLsRequest()
			r.ResourceType, r.ResourcePatternType, r.Operation, r.PermissionType = 1, 1, 1, 1
			return r
		}},
		{"CreateAcls", []acl.Binding{cluster(acl.OperationAlter)}, clusterCode, func() kmsg.Request {
			r := kmsg.NewPtrCreateACLsRequest()
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.ResourcePatternType = 2, "m.other", 3
			c.Principal, c.Host, c.Operation, c.PermissionType = "User:x", "*", 3, 3
			r.Creations = append(r.Creations, c)
			return r
		}},
		{"DeleteAcls", []acl.Binding{cluster(acl.OperationAlter)}, clusterCode, func() kmsg.Request {
			r := kmsg.NewPtrDeleteACLsRequest()
			f := kmsg.NewDeleteACLsRequestFilter()
			f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Operation, f.PermissionType = 2, kmsg.StringPtr("m.other"), 3, 1, 1
			r.Filters = append(r.Filters, f)
			return r
		}},
		{"DescribeConfigs topic", []acl.Binding{topic(acl.OperationDescribeConfigs)}, topicCode, func() kmsg.Request {
			r := kmsg.NewPtrDescribeConfigsRequest()
			res := kmsg.NewDescribeConfigsRequestResource()
			res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "m.topic"
			r.Resources = append(r.Resources, res)
			return r
		}},
		{"DescribeConfigs broker", []acl.Binding{cluster(acl.OperationDescribeConfigs)}, clusterCode, func() kmsg.Request {
			r := kmsg.NewPtrDescribeConfigsRequest()
			res := kmsg.NewDescribeConfigsRequestResource()
			res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
			r.Resources = append(r.Resources, res)
			return r
		}},
		{"AlterConfigs", []acl.Binding{topic(acl.OperationAlterConfigs)}, topicCode, func() kmsg.Request {
			r := kmsg.NewPtrAlterConfigsRequest()
			res := kmsg.NewAlterConfigsRequestResource()
			res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "m.topic"
			r.Resources, r.ValidateOnly = append(r.Resources, res), true
			return r
		}},
		{"IncrementalAlterConfigs", []acl.Binding{topic(acl.OperationAlterConfigs)}, topicCode, func() kmsg.Request {
			r := kmsg.NewPtrIncrementalAlterConfigsRequest()
			res := kmsg.NewIncrementalAlterConfigsRequestResource()
			res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "m.topic"
			r.Resources, r.ValidateOnly = append(r.Resources, res), true
			return r
		}},
		{"DescribeLogDirs", []acl.Binding{cluster(acl.OperationDescribe)}, clusterCode, func() kmsg.Request { return kmsg.NewPtrDescribeLogDirsRequest() }},
		{"CreatePartitions", []acl.Binding{topic(acl.OperationAlter)}, topicCode, func() kmsg.Request {
			r := kmsg.NewPtrCreatePartitionsRequest()
			tp := kmsg.NewCreatePartitionsRequestTopic()
			tp.Topic, tp.Count = "m.topic", 1
			r.Topics, r.TimeoutMillis, r.ValidateOnly = append(r.Topics, tp), 5000, true
			return r
		}},
		{"DeleteGroups", []acl.Binding{group(acl.OperationDelete)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrDeleteGroupsRequest()
			r.Groups = []string{"m.group"}
			return r
		}},
		{"ElectLeaders", []acl.Binding{cluster(acl.OperationAlter)}, clusterCode, func() kmsg.Request {
			r := kmsg.NewPtrElectLeadersRequest()
			r.TimeoutMillis = 5000
			return r
		}},
		{"OffsetDelete", []acl.Binding{group(acl.OperationDelete), topic(acl.OperationRead)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrOffsetDeleteRequest()
			r.Group = "m.group"
			tp := kmsg.NewOffsetDeleteRequestTopic()
			tp.Topic = "m.topic"
			tp.Partitions = append(tp.Partitions, kmsg.NewOffsetDeleteRequestTopicPartition())
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"DescribeClientQuotas", []acl.Binding{cluster(acl.OperationDescribeConfigs)}, clusterCode, func() kmsg.Request { return kmsg.NewPtrDescribeClientQuotasRequest() }},
		{"AlterClientQuotas", []acl.Binding{cluster(acl.OperationAlterConfigs)}, clusterCode, func() kmsg.Request {
			r := kmsg.NewPtrAlterClientQuotasRequest()
			e := kmsg.NewAlterClientQuotasRequestEntry()
			entity := kmsg.NewAlterClientQuotasRequestEntryEntity()
			entity.Type, entity.Name = "client-id", kmsg.StringPtr("x")
			e.Entity = append(e.Entity, entity)
			r.Entries, r.ValidateOnly = append(r.Entries, e), true
			return r
		}},
		{"DescribeUserScramCredentials", []acl.Binding{cluster(acl.OperationDescribe)}, clusterCode, func() kmsg.Request {
			return kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		}},
		{"AlterUserScramCredentials", []acl.Binding{cluster(acl.OperationAlter)}, clusterCode, func() kmsg.Request {
			r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
			d.Name, d.Mechanism = "ghost", 1
			r.Deletions = append(r.Deletions, d)
			return r
		}},
		{"DescribeProducers", []acl.Binding{topic(acl.OperationRead)}, topicCode, func() kmsg.Request {
			r := kmsg.NewPtrDescribeProducersRequest()
			tp := kmsg.NewDescribeProducersRequestTopic()
			tp.Topic, tp.Partitions = "m.topic", []int32{0}
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"DescribeTransactions", []acl.Binding{txn(acl.OperationDescribe)}, txnCode, func() kmsg.Request {
			r := kmsg.NewPtrDescribeTransactionsRequest()
			r.TransactionalIDs = []string{"m.txn"}
			return r
		}},
		{"ConsumerGroupHeartbeat", []acl.Binding{group(acl.OperationRead)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = "m.group", "member-a-0123456789abcdef", -1, 5000
			r.SubscribedTopicNames = []string{"m.topic"}
			return r
		}},
		{"ConsumerGroupDescribe", []acl.Binding{group(acl.OperationDescribe)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrConsumerGroupDescribeRequest()
			r.Groups = []string{"m.group"}
			return r
		}},
		{"ShareGroupHeartbeat", []acl.Binding{allowBinding("User:granted", acl.OperationRead, acl.ResourceGroup, "m.share", acl.PatternLiteral)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrShareGroupHeartbeatRequest()
			r.GroupID, r.MemberID, r.MemberEpoch, r.SubscribedTopicNames = "m.share", "member-b-0123456789abcdef", 1, []string{"m.topic"}
			return r
		}},
		{"ShareGroupDescribe", []acl.Binding{allowBinding("User:granted", acl.OperationDescribe, acl.ResourceGroup, "m.share", acl.PatternLiteral)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrShareGroupDescribeRequest()
			r.GroupIDs = []string{"m.share"}
			return r
		}},
		{"ShareFetch", []acl.Binding{allowBinding("User:granted", acl.OperationRead, acl.ResourceGroup, "m.share", acl.PatternLiteral), topic(acl.OperationRead)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrShareFetchRequest()
			r.GroupID, r.MemberID, r.ShareSessionEpoch, r.MaxBytes = kmsg.StringPtr("m.share"), kmsg.StringPtr("member-b-0123456789abcdef"), 0, 1<<20
			tp := kmsg.NewShareFetchRequestTopic()
			tp.TopicID = mTopicID
			tp.Partitions = append(tp.Partitions, kmsg.NewShareFetchRequestTopicPartition())
			r.Topics = append(r.Topics, tp)
			return r
		}},
		{"ShareAcknowledge", []acl.Binding{allowBinding("User:granted", acl.OperationRead, acl.ResourceGroup, "m.share", acl.PatternLiteral), topic(acl.OperationRead)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrShareAcknowledgeRequest()
			r.GroupID, r.MemberID, r.ShareSessionEpoch = kmsg.StringPtr("m.share"), kmsg.StringPtr("member-b-0123456789abcdef"), 1
			return r
		}},
		{"DescribeShareGroupOffsets", []acl.Binding{allowBinding("User:granted", acl.OperationDescribe, acl.ResourceGroup, "m.share", acl.PatternLiteral)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
			g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
			g.GroupID = "m.share"
			r.Groups = append(r.Groups, g)
			return r
		}},
		{"AlterShareGroupOffsets", []acl.Binding{allowBinding("User:granted", acl.OperationRead, acl.ResourceGroup, "m.share", acl.PatternLiteral)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrAlterShareGroupOffsetsRequest()
			r.GroupID = "m.share"
			return r
		}},
		{"DeleteShareGroupOffsets", []acl.Binding{allowBinding("User:granted", acl.OperationDelete, acl.ResourceGroup, "m.share", acl.PatternLiteral)}, groupCode, func() kmsg.Request {
			r := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
			r.GroupID = "m.share"
			return r
		}},
	}
	covered := map[int16]bool{}
	resetGrants := func(bindings []acl.Binding) {
		t.Helper()
		principal := "User:granted"
		filter := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Principal: &principal,
			Operation: acl.OperationAny, Permission: acl.PermissionAny}
		if _, err := adminAPI.DeleteACLs(ctx, filter); err != nil {
			t.Fatal(err)
		}
		if len(bindings) > 0 {
			grant(t, admin, bindings...)
		}
	}
	for _, c := range cases {
		req := c.build()
		covered[req.Key()] = true
		resetGrants(c.grant)
		denied := errorCodes(reflect.ValueOf(nobody.do(c.build())), nil)
		if c.name == "AddPartitionsToTxn topic" {
			// Transactional id granted, topic not: the topic is refused, nothing else attempted.
			resetGrants(c.grant[:1])
			denied = errorCodes(reflect.ValueOf(granted.do(c.build())), nil)
			resetGrants(c.grant)
		}
		if !slices.Contains(denied, c.code) {
			t.Errorf("%s: principal without the ACL got codes %v, want %d", c.name, denied, c.code)
		}
		// Exactly the grant: any one binding less is not enough (the first check refuses).
		if len(c.grant) > 1 && c.name != "AddPartitionsToTxn topic" {
			resetGrants(c.grant[1:])
			if partial := errorCodes(reflect.ValueOf(granted.do(c.build())), nil); !slices.Contains(partial, c.code) {
				t.Errorf("%s: without %v got codes %v, want %d", c.name, c.grant[0], partial, c.code)
			}
			resetGrants(c.grant)
		}
		allowed := errorCodes(reflect.ValueOf(granted.do(req)), nil)
		if slices.ContainsFunc(allowed, func(code int16) bool { return slices.Contains(authorizationCodes, code) }) {
			t.Errorf("%s: principal granted %v got codes %v", c.name, c.grant, allowed)
		}
	}
	// OffsetFetch v8 checks DESCRIBE on each named topic inside an authorized group.
	offsetFetchV8 := func() kmsg.Request {
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Version = 8
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "m.group"
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.Topic, gt.Partitions = "m.topic", []int32{0}
		g.Topics = append(g.Topics, gt)
		r.Groups = append(r.Groups, g)
		return r
	}
	resetGrants([]acl.Binding{group(acl.OperationDescribe)})
	if codes := errorCodes(reflect.ValueOf(granted.do(offsetFetchV8())), nil); !slices.Contains(codes, topicCode) {
		t.Errorf("OffsetFetch v8 of a topic without DESCRIBE: codes %v", codes)
	}
	resetGrants([]acl.Binding{group(acl.OperationDescribe), topic(acl.OperationDescribe)})
	if codes := errorCodes(reflect.ValueOf(granted.do(offsetFetchV8())), nil); slices.ContainsFunc(codes, func(c int16) bool { return slices.Contains(authorizationCodes, c) }) {
		t.Errorf("OffsetFetch v8 with DESCRIBE on group and topic: codes %v", codes)
	}
	// Authorized operations (KIP-430): the bits of exactly the granted operations (WRITE implies
	// DESCRIBE).
	resetGrants([]acl.Binding{topic(acl.OperationWrite)})
	withOps := kmsg.NewPtrMetadataRequest()
	withOps.Version, withOps.IncludeTopicAuthorizedOperations = 10, true
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("m.topic")
	withOps.Topics = append(withOps.Topics, mt)
	if ops := granted.do(withOps).(*kmsg.MetadataResponse).Topics[0].AuthorizedOperations; ops != 1<<acl.OperationWrite|1<<acl.OperationDescribe {
		t.Errorf("topic authorized operations %b, want WRITE and DESCRIBE", ops)
	}
	resetGrants(nil)
	t.Logf("matrix covers %d APIs by key: %v", len(covered), slices.Sorted(mapKeys(covered)))

	// Listings hide what the principal may not describe.
	all := kmsg.NewPtrMetadataRequest()
	for _, tp := range nobody.do(all).(*kmsg.MetadataResponse).Topics {
		if tp.Topic != nil && (*tp.Topic == "m.topic" || *tp.Topic == "m.hidden") {
			t.Errorf("all-topics Metadata shows %s to a principal without DESCRIBE", *tp.Topic)
		}
	}
	grant(t, admin, allowBinding("User:nobody", acl.OperationDescribe, acl.ResourceTopic, "m.topic", acl.PatternLiteral))
	var listed []string
	all = kmsg.NewPtrMetadataRequest()
	for _, tp := range nobody.do(all).(*kmsg.MetadataResponse).Topics {
		if tp.Topic != nil {
			listed = append(listed, *tp.Topic)
		}
	}
	if !slices.Contains(listed, "m.topic") || slices.Contains(listed, "m.hidden") {
		t.Errorf("with DESCRIBE on m.topic only, Metadata lists %v", listed)
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation, commit.Topics = 8, "m.listed", -1, offsetCommitTopics()
	if codes := errorCodes(reflect.ValueOf(dialSASL(t, d.kafka, "admin", "admin-secret").do(commit)), nil); slices.ContainsFunc(codes, func(c int16) bool { return c != 0 }) {
		t.Fatalf("admin commit: %v", codes)
	}
	for _, g := range nobody.do(kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse).Groups {
		if g.Group == "m.listed" {
			t.Error("ListGroups shows a group the principal may not describe")
		}
	}
	root := dialSASL(t, d.kafka, "admin", "admin-secret")
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr("m.listed-txn"), 10000
	if code := root.do(init).(*kmsg.InitProducerIDResponse).ErrorCode; code != 0 {
		t.Fatalf("admin InitProducerId: %d", code)
	}
	listedBy := func(c *saslConn) bool {
		for _, s := range c.do(kmsg.NewPtrListTransactionsRequest()).(*kmsg.ListTransactionsResponse).TransactionStates {
			if s.TransactionalID == "m.listed-txn" {
				return true
			}
		}
		return false
	}
	if !listedBy(root) || listedBy(nobody) {
		t.Errorf("ListTransactions: listed for the super user %v, for a principal without DESCRIBE %v", listedBy(root), listedBy(nobody))
	}
}

// TestACLPatternsAndDenyWins: literal names match only themselves, prefixes every name they begin,
// and a DENY wins over any ALLOW; a super user needs no ACL.
func TestACLPatternsAndDenyWins(t *testing.T) {
	d := startSecureDaemon(t, map[string]string{"admin": "admin-secret", "carol": "c"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := repoClient(t, d.kafka, client.SASLPlain, "admin", "admin-secret")
	for _, name := range []string{"lit", "lit2", "pre.a", "pre.secret", "other"} {
		if err := client.NewAdmin(admin).CreateTopics(ctx, client.TopicSpec{Name: name, Partitions: 1, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
	}
	grant(t, admin,
		allowBinding("User:carol", acl.OperationDescribe, acl.ResourceTopic, "lit", acl.PatternLiteral),
		allowBinding("User:carol", acl.OperationDescribe, acl.ResourceTopic, "pre.", acl.PatternPrefixed),
		acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "pre.secret", PatternType: acl.PatternLiteral, Principal: "User:*",
			Host: "*", Operation: acl.OperationAll, Permission: acl.PermissionDeny})
	want := map[string]bool{"lit": true, "lit2": false, "pre.a": true, "pre.secret": false, "other": false}
	carol, root := dialSASL(t, d.kafka, "carol", "c"), dialSASL(t, d.kafka, "admin", "admin-secret")
	for name, allowed := range want {
		req := kmsg.NewPtrListOffsetsRequest()
		tp := kmsg.NewListOffsetsRequestTopic()
		tp.Topic = name
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Timestamp = -1
		tp.Partitions = append(tp.Partitions, p)
		req.Topics = append(req.Topics, tp)
		codes := errorCodes(reflect.ValueOf(carol.do(req)), nil)
		if got := !slices.Contains(codes, 29); got != allowed {
			t.Errorf("carol DESCRIBE %s: codes %v, allowed %v, want %v", name, codes, got, allowed)
		}
		req.SetVersion(0)
		if codes := errorCodes(reflect.ValueOf(root.do(req)), nil); slices.Contains(codes, 29) {
			t.Errorf("super user refused on %s: %v", name, codes)
		}
	}
}
