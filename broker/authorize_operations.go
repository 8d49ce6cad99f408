package broker

// Authorized operations (KIP-430): Metadata, DescribeCluster and the group describe APIs answer,
// when asked, a bitfield of the operations the principal may perform on each resource (bit n is
// operation code n), over the operations Kafka lists for the resource type. Without the authorizer
// the handlers answer "not provided" (MinInt32), as before.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/acl"
)

var supportedOperations = map[acl.ResourceType][]acl.Operation{
	acl.ResourceTopic: {acl.OperationRead, acl.OperationWrite, acl.OperationCreate, acl.OperationDelete, acl.OperationAlter,
		acl.OperationDescribe, acl.OperationDescribeConfigs, acl.OperationAlterConfigs},
	acl.ResourceGroup: {acl.OperationRead, acl.OperationDescribe, acl.OperationDelete, acl.OperationDescribeConfigs, acl.OperationAlterConfigs},
	acl.ResourceCluster: {acl.OperationCreate, acl.OperationClusterAction, acl.OperationDescribeConfigs, acl.OperationAlterConfigs,
		acl.OperationIdempotentWrite, acl.OperationAlter, acl.OperationDescribe},
}

// authorizedOperations is the bitfield of the resource's operations the principal may perform.
func (z *authorization) authorizedOperations(rt acl.ResourceType, name string) int32 {
	var bits int32
	for _, op := range supportedOperations[rt] {
		if z.allowed(op, rt, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// withAuthorizedOperations adds the amend that fills the response's authorized operations where
// the request asks for them.
func withAuthorizedOperations(check rule) rule {
	return func(z *authorization, req kmsg.Request) bool {
		if check != nil && !check(z, req) {
			return false
		}
		switch r := req.(type) {
		case *kmsg.MetadataRequest:
			if !r.IncludeTopicAuthorizedOperations && !r.IncludeClusterAuthorizedOperations {
				return true
			}
			z.r.amend = append(z.r.amend, func(resp kmsg.Response) {
				m := resp.(*kmsg.MetadataResponse)
				if r.IncludeClusterAuthorizedOperations {
					m.AuthorizedOperations = z.authorizedOperations(acl.ResourceCluster, acl.ClusterName)
				}
				if r.IncludeTopicAuthorizedOperations {
					for i := range m.Topics {
						if m.Topics[i].Topic != nil && m.Topics[i].ErrorCode == 0 {
							m.Topics[i].AuthorizedOperations = z.authorizedOperations(acl.ResourceTopic, *m.Topics[i].Topic)
						}
					}
				}
			})
		case *kmsg.DescribeClusterRequest:
			if r.IncludeClusterAuthorizedOperations {
				z.r.amend = append(z.r.amend, func(resp kmsg.Response) {
					resp.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations = z.authorizedOperations(acl.ResourceCluster, acl.ClusterName)
				})
			}
		case *kmsg.DescribeGroupsRequest:
			if r.IncludeAuthorizedOperations {
				z.r.amend = append(z.r.amend, func(resp kmsg.Response) {
					groups := resp.(*kmsg.DescribeGroupsResponse).Groups
					for i := range groups {
						if groups[i].ErrorCode == 0 {
							groups[i].AuthorizedOperations = z.authorizedOperations(acl.ResourceGroup, groups[i].Group)
						}
					}
				})
			}
		case *kmsg.ConsumerGroupDescribeRequest:
			if r.IncludeAuthorizedOperations {
				z.r.amend = append(z.r.amend, func(resp kmsg.Response) {
					groups := resp.(*kmsg.ConsumerGroupDescribeResponse).Groups
					for i := range groups {
						if groups[i].ErrorCode == 0 {
							groups[i].AuthorizedOperations = z.authorizedOperations(acl.ResourceGroup, groups[i].Group)
						}
					}
				})
			}
		case *kmsg.ShareGroupDescribeRequest:
			if r.IncludeAuthorizedOperations {
				z.r.amend = append(z.r.amend, func(resp kmsg.Response) {
					groups := resp.(*kmsg.ShareGroupDescribeResponse).Groups
					for i := range groups {
						if groups[i].ErrorCode == 0 {
							groups[i].AuthorizedOperations = z.authorizedOperations(acl.ResourceGroup, groups[i].GroupID)
						}
					}
				})
			}
		}
		return true
	}
}
