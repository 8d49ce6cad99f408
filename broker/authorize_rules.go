package broker

// The authorization rules that do not fit the generic shapes of authorize.go.

import (
	"reflect"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/acl"
	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/protocol"
)

// authorizeFetch: a follower's fetch needs CLUSTER_ACTION (refused: every partition
// TOPIC_AUTHORIZATION_FAILED, as Kafka); a consumer's READ on each topic. Refused topics are
// answered at once, without waiting for data.
func authorizeFetch(z *authorization, req kmsg.Request) bool {
	fetch := req.(*kmsg.FetchRequest)
	replica := fetch.ReplicaID >= 0 || fetch.Version >= 15 && fetch.ReplicaState.ID >= 0
	allow := func(name string) bool { return z.allowed(acl.OperationRead, acl.ResourceTopic, name) }
	if replica {
		permitted := z.cluster(acl.OperationClusterAction)
		allow = func(string) bool { return permitted }
	}
	denied := z.filterTopics(req, protocol.TopicAuthorizationFailed, allow)
	z.r.amend = nil // Fetch is framed by hand: refusals go through deniedFetch
	for _, t := range denied {
		result := fetchTopicResult{topic: t.name, topicID: t.id}
		for _, p := range t.partitions {
			result.partitions = append(result.partitions, fetchPartitionResult{partition: p, errorCode: protocol.TopicAuthorizationFailed.Code,
				highWatermark: -1, lastStable: -1, logStartOffset: -1})
		}
		z.r.deniedFetch = append(z.r.deniedFetch, result)
	}
	if len(denied) > 0 {
		fetch.MaxWaitMillis = 0
	}
	return true
}

// authorizeMetadata: topics the principal may not DESCRIBE are left out of an all-topics answer and
// answered TOPIC_AUTHORIZATION_FAILED when named; a named unknown topic that would be auto-created
// needs CREATE on the cluster or the topic, else TOPIC_AUTHORIZATION_FAILED.
func authorizeMetadata(z *authorization, req kmsg.Request) bool {
	metadata := req.(*kmsg.MetadataRequest)
	describable := func(t kmsg.MetadataResponseTopic) bool {
		return t.Topic == nil || z.allowed(acl.OperationDescribe, acl.ResourceTopic, *t.Topic)
	}
	if metadata.Topics == nil || metadata.Version == 0 && len(metadata.Topics) == 0 {
		z.r.amend = append(z.r.amend, func(resp kmsg.Response) {
			m := resp.(*kmsg.MetadataResponse)
			m.Topics = slices.DeleteFunc(m.Topics, func(t kmsg.MetadataResponseTopic) bool { return !describable(t) })
		})
		return true
	}
	meta := z.b.coordinator.Metadata()
	autoCreate := z.b.config.AutoCreateTopics && (metadata.Version < 4 || metadata.AllowAutoTopicCreation)
	mayCreate := func(name string) bool {
		return z.cluster(acl.OperationCreate) || z.allowed(acl.OperationCreate, acl.ResourceTopic, name)
	}
	denied := z.filterTopics(req, protocol.TopicAuthorizationFailed, func(name string) bool {
		if !z.allowed(acl.OperationDescribe, acl.ResourceTopic, name) {
			return false
		}
		_, exists := meta.Topics[name]
		return exists || name == coordinator.ConsumerOffsetsTopic || !autoCreate || mayCreate(name)
	})
	if len(denied) > 0 && len(metadata.Topics) == 0 && metadata.Version == 0 {
		// An empty v0 list means every topic: answer only the refusals.
		z.r.amend = append([]func(kmsg.Response){func(resp kmsg.Response) { resp.(*kmsg.MetadataResponse).Topics = nil }}, z.r.amend...)
	}
	return true
}

// authorizeOffsetFetch: DESCRIBE on the group (v8+: on each group); topics the principal may not
// DESCRIBE are refused when named and left out of an all-topics answer.
func authorizeOffsetFetch(z *authorization, req kmsg.Request) bool {
	fetch := req.(*kmsg.OffsetFetchRequest)
	if fetch.Version >= 8 {
		groupsRule(acl.OperationDescribe)(z, req)
		authorizeOffsetFetchGroupTopics(z, fetch)
		return true
	}
	if !z.allowed(acl.OperationDescribe, acl.ResourceGroup, fetch.Group) {
		return z.refuse(req, protocol.GroupAuthorizationFailed)
	}
	describable := func(name string) bool { return z.allowed(acl.OperationDescribe, acl.ResourceTopic, name) }
	if fetch.Topics == nil {
		z.r.amend = append(z.r.amend, func(resp kmsg.Response) {
			f := resp.(*kmsg.OffsetFetchResponse)
			f.Topics = slices.DeleteFunc(f.Topics, func(t kmsg.OffsetFetchResponseTopic) bool { return !describable(t.Topic) })
		})
		return true
	}
	z.filterTopics(req, protocol.TopicAuthorizationFailed, describable)
	return true
}

// authorizeOffsetFetchGroupTopics applies the topic DESCRIBE check inside each group of an
// OffsetFetch v8+: named topics refused get TOPIC_AUTHORIZATION_FAILED per partition, an all-topics
// group leaves them out.
func authorizeOffsetFetchGroupTopics(z *authorization, fetch *kmsg.OffsetFetchRequest) {
	describable := func(name string) bool { return z.allowed(acl.OperationDescribe, acl.ResourceTopic, name) }
	refused := map[string][]kmsg.OffsetFetchRequestGroupTopic{}
	for i := range fetch.Groups {
		g := &fetch.Groups[i]
		if g.Topics == nil {
			continue
		}
		kept := g.Topics[:0:0]
		for _, t := range g.Topics {
			if describable(t.Topic) {
				kept = append(kept, t)
			} else {
				refused[g.Group] = append(refused[g.Group], t)
			}
		}
		g.Topics = kept
	}
	z.r.amend = append(z.r.amend, func(resp kmsg.Response) {
		f := resp.(*kmsg.OffsetFetchResponse)
		for i := range f.Groups {
			g := &f.Groups[i]
			g.Topics = slices.DeleteFunc(g.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool { return !describable(t.Topic) })
			for _, t := range refused[g.Group] {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.ErrorCode = p, protocol.TopicAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				g.Topics = append(g.Topics, rt)
			}
		}
	})
}

// authorizeFindCoordinator: DESCRIBE on the group (key type 0) or transactional id (1); share
// coordinator keys (2) need CLUSTER_ACTION. v4 batches keys: each refused one is answered alone.
func authorizeFindCoordinator(z *authorization, req kmsg.Request) bool {
	find := req.(*kmsg.FindCoordinatorRequest)
	allowed := func(key string) (bool, protocol.ErrorCode) {
		switch find.CoordinatorType {
		case 0:
			return z.allowed(acl.OperationDescribe, acl.ResourceGroup, key), protocol.GroupAuthorizationFailed
		case 1:
			return z.allowed(acl.OperationDescribe, acl.ResourceTransactionalID, key), protocol.TransactionalIDAuthorizationFailed
		}
		return z.cluster(acl.OperationClusterAction), protocol.ClusterAuthorizationFailed
	}
	if find.Version < 4 {
		if ok, code := allowed(find.CoordinatorKey); !ok {
			return z.refuse(req, code)
		}
		return true
	}
	var kept []string
	var refused []kmsg.FindCoordinatorResponseCoordinator
	for _, key := range find.CoordinatorKeys {
		if ok, code := allowed(key); ok {
			kept = append(kept, key)
		} else {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.Port, c.ErrorCode = key, -1, -1, code.Code
			refused = append(refused, c)
		}
	}
	if len(refused) == 0 {
		return true
	}
	z.b.security.refusals.Inc()
	find.CoordinatorKeys = kept
	if kept == nil {
		find.CoordinatorKeys = []string{}
	}
	z.r.amend = append(z.r.amend, func(resp kmsg.Response) {
		f := resp.(*kmsg.FindCoordinatorResponse)
		f.Coordinators = append(f.Coordinators, refused...)
	})
	return true
}

// groupsRule checks op on each group of a request that names several (DescribeGroups,
// DeleteGroups, ConsumerGroupDescribe, ...): refused groups are answered
// GROUP_AUTHORIZATION_FAILED, the others handled.
func groupsRule(op acl.Operation) rule {
	return func(z *authorization, req kmsg.Request) bool {
		list := groupListField(req)
		if !list.IsValid() {
			return true
		}
		kept := reflect.MakeSlice(list.Type(), 0, list.Len())
		var refused []string
		for i := range list.Len() {
			if name := groupNameOf(list.Index(i)); z.allowed(op, acl.ResourceGroup, name) {
				kept = reflect.Append(kept, list.Index(i))
			} else {
				refused = append(refused, name)
			}
		}
		if len(refused) == 0 {
			return true
		}
		z.b.security.refusals.Inc()
		list.Set(kept)
		z.r.amend = append(z.r.amend, func(resp kmsg.Response) { appendGroupErrors(resp, refused, protocol.GroupAuthorizationFailed.Code) })
		return true
	}
}

// appendGroupErrors adds groups answering code to a response's group list.
func appendGroupErrors(resp kmsg.Response, groups []string, code int16) {
	list := groupListField(resp)
	if !list.IsValid() || list.Type().Elem().Kind() != reflect.Struct {
		return
	}
	for _, name := range groups {
		element := newElement(list.Type().Elem())
		setString(element.FieldByName("Group"), name)
		setString(element.FieldByName("GroupID"), name)
		setInt(element.FieldByName("ErrorCode"), int64(code))
		list.Set(reflect.Append(list, element))
	}
}

// authorizeListGroups: with DESCRIBE on the cluster every group, else those the principal may
// DESCRIBE.
func authorizeListGroups(z *authorization, req kmsg.Request) bool {
	if z.cluster(acl.OperationDescribe) {
		return true
	}
	z.r.amend = append(z.r.amend, func(resp kmsg.Response) {
		l := resp.(*kmsg.ListGroupsResponse)
		l.Groups = slices.DeleteFunc(l.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
			return !z.allowed(acl.OperationDescribe, acl.ResourceGroup, g.Group)
		})
	})
	return true
}

// authorizeCreateTopics: CREATE on the cluster, or on each topic.
func authorizeCreateTopics(z *authorization, req kmsg.Request) bool {
	if z.cluster(acl.OperationCreate) {
		return true
	}
	z.filterTopics(req, protocol.TopicAuthorizationFailed, func(name string) bool {
		return z.allowed(acl.OperationCreate, acl.ResourceTopic, name)
	})
	return true
}

// authorizeDeleteTopics: DELETE on each topic (v0-v5 name them in TopicNames, v6 in Topics).
func authorizeDeleteTopics(z *authorization, req kmsg.Request) bool {
	del := req.(*kmsg.DeleteTopicsRequest)
	allow := func(name string) bool { return z.allowed(acl.OperationDelete, acl.ResourceTopic, name) }
	if del.Version >= 6 {
		z.filterTopics(req, protocol.TopicAuthorizationFailed, allow)
		return true
	}
	var kept []string
	var refused []requestTopic
	for _, name := range del.TopicNames {
		if allow(name) {
			kept = append(kept, name)
		} else {
			refused = append(refused, requestTopic{name: name})
		}
	}
	if len(refused) > 0 {
		z.b.security.refusals.Inc()
		del.TopicNames = append([]string{}, kept...)
		z.r.amend = append(z.r.amend, func(resp kmsg.Response) {
			appendTopicErrors(resp, refused, protocol.TopicAuthorizationFailed.Code)
		})
	}
	return true
}

// authorizeInitProducerID: a transactional producer needs WRITE on its transactional id; an
// idempotent one IDEMPOTENT_WRITE on the cluster or WRITE on some topic (Kafka 3.0+), else
// CLUSTER_AUTHORIZATION_FAILED.
func authorizeInitProducerID(z *authorization, req kmsg.Request) bool {
	init := req.(*kmsg.InitProducerIDRequest)
	if init.TransactionalID != nil {
		return transactionRule(acl.OperationWrite)(z, req)
	}
	if z.cluster(acl.OperationIdempotentWrite) ||
		z.b.security.authorizer.AuthorizeAny(z.acls, z.principal, z.host, acl.OperationWrite, acl.ResourceTopic) {
		return true
	}
	return z.refuse(req, protocol.ClusterAuthorizationFailed)
}

// authorizeOffsetForLeaderEpoch: a follower's request (replica id set, v3+) needs CLUSTER_ACTION;
// a client's DESCRIBE on each topic.
func authorizeOffsetForLeaderEpoch(z *authorization, req kmsg.Request) bool {
	if o := req.(*kmsg.OffsetForLeaderEpochRequest); o.Version >= 3 && o.ReplicaID >= 0 {
		permitted := z.cluster(acl.OperationClusterAction)
		z.filterTopics(req, protocol.TopicAuthorizationFailed, func(string) bool { return permitted })
		return true
	}
	return topicsRule(acl.OperationDescribe)(z, req)
}

// authorizeAddPartitionsToTxn: v0-v3 (clients) need WRITE on the transactional id and on every
// topic; if any topic is refused nothing is added: refused partitions answer
// TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED. v4+ (brokers verifying) need
// CLUSTER_ACTION.
func authorizeAddPartitionsToTxn(z *authorization, req kmsg.Request) bool {
	add := req.(*kmsg.AddPartitionsToTxnRequest)
	if add.Version >= 4 {
		return clusterRule(acl.OperationClusterAction)(z, req)
	}
	if !transactionRule(acl.OperationWrite)(z, req) {
		return false
	}
	var refused, untried []requestTopic
	for _, t := range add.Topics {
		rt := requestTopic{name: t.Topic, partitions: t.Partitions}
		if z.allowed(acl.OperationWrite, acl.ResourceTopic, t.Topic) {
			untried = append(untried, rt)
		} else {
			refused = append(refused, rt)
		}
	}
	if len(refused) == 0 {
		return true
	}
	z.b.security.refusals.Inc()
	resp := req.ResponseKind()
	appendTopicErrors(resp, refused, protocol.TopicAuthorizationFailed.Code)
	appendTopicErrors(resp, untried, protocol.OperationNotAttempted.Code)
	z.r.failed()
	z.r.respond(resp)
	return false
}

// configResourcesRule checks op (DESCRIBE_CONFIGS or ALTER_CONFIGS) per config resource: topics on
// the topic, brokers and broker loggers on the cluster, groups on the group.
func configResourcesRule(op acl.Operation) rule {
	return func(z *authorization, req kmsg.Request) bool {
		list := field(reflect.ValueOf(req), "Resources")
		if !list.IsValid() {
			return true
		}
		kept := reflect.MakeSlice(list.Type(), 0, list.Len())
		type refusal struct {
			resourceType int64
			name         string
			code         int16
		}
		var refused []refusal
		for i := range list.Len() {
			element := list.Index(i)
			resourceType := element.FieldByName("ResourceType").Int()
			name := element.FieldByName("ResourceName").String()
			var ok bool
			var code protocol.ErrorCode
			switch kmsg.ConfigResourceType(resourceType) {
			case kmsg.ConfigResourceTypeTopic:
				ok, code = z.allowed(op, acl.ResourceTopic, name), protocol.TopicAuthorizationFailed
			case kmsg.ConfigResourceTypeGroupConfig:
				ok, code = z.allowed(op, acl.ResourceGroup, name), protocol.GroupAuthorizationFailed
			default:
				ok, code = z.cluster(op), protocol.ClusterAuthorizationFailed
			}
			if ok {
				kept = reflect.Append(kept, element)
			} else {
				refused = append(refused, refusal{resourceType, name, code.Code})
			}
		}
		if len(refused) == 0 {
			return true
		}
		z.b.security.refusals.Inc()
		list.Set(kept)
		z.r.amend = append(z.r.amend, func(resp kmsg.Response) {
			out := field(reflect.ValueOf(resp), "Resources")
			for _, r := range refused {
				element := newElement(out.Type().Elem())
				setInt(element.FieldByName("ResourceType"), r.resourceType)
				setString(element.FieldByName("ResourceName"), r.name)
				setInt(element.FieldByName("ErrorCode"), int64(r.code))
				out.Set(reflect.Append(out, element))
			}
		})
		return true
	}
}

// authorizeDescribeTransactions: DESCRIBE on each transactional id.
func authorizeDescribeTransactions(z *authorization, req kmsg.Request) bool {
	describe := req.(*kmsg.DescribeTransactionsRequest)
	var kept, refused []string
	for _, id := range describe.TransactionalIDs {
		if z.allowed(acl.OperationDescribe, acl.ResourceTransactionalID, id) {
			kept = append(kept, id)
		} else {
			refused = append(refused, id)
		}
	}
	if len(refused) == 0 {
		return true
	}
	z.b.security.refusals.Inc()
	describe.TransactionalIDs = append([]string{}, kept...)
	z.r.amend = append(z.r.amend, func(resp kmsg.Response) {
		d := resp.(*kmsg.DescribeTransactionsResponse)
		for _, id := range refused {
			s := kmsg.NewDescribeTransactionsResponseTransactionState()
			s.TransactionalID, s.ErrorCode = id, protocol.TransactionalIDAuthorizationFailed.Code
			d.TransactionStates = append(d.TransactionStates, s)
		}
	})
	return true
}

// authorizeListTransactions lists only the transactional ids the principal may DESCRIBE.
func authorizeListTransactions(z *authorization, req kmsg.Request) bool {
	z.r.amend = append(z.r.amend, func(resp kmsg.Response) {
		l := resp.(*kmsg.ListTransactionsResponse)
		l.TransactionStates = slices.DeleteFunc(l.TransactionStates, func(s kmsg.ListTransactionsResponseTransactionState) bool {
			return !z.allowed(acl.OperationDescribe, acl.ResourceTransactionalID, s.TransactionalID)
		})
	})
	return true
}
