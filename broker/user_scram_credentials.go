package broker

// DescribeUserScramCredentials v0 and AlterUserScramCredentials v0: SCRAM users live in the
// replicated metadata as salt, iterations, StoredKey and ServerKey (coordinator/security.go);
// passwords never reach the broker (the client salts them). Describe lists mechanisms and
// iterations, never keys; a named user without credentials gets RESOURCE_NOT_FOUND, a name given
// twice DUPLICATE_RESOURCE. Alter refuses a user named twice (DUPLICATE_RESOURCE), unknown
// mechanisms (UNSUPPORTED_SASL_MECHANISM), iterations outside [4096, 16384] or an empty salt
// (UNACCEPTABLE_CREDENTIAL), an empty name (UNACCEPTABLE_CREDENTIAL); deleting what does not exist
// answers RESOURCE_NOT_FOUND. Authorization (DESCRIBE / ALTER on the cluster) is in authorize.go.

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/scram"
)

// securityWriteTimeout bounds one ACL or credential change through Raft.
const securityWriteTimeout = 10 * time.Second

func (b *Broker) handleDescribeUserScramCredentials(r *request, req *kmsg.DescribeUserSCRAMCredentialsRequest) {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	security := b.coordinator.Security()
	users := security.Users()
	named := req.Users != nil
	if named {
		users = users[:0:0]
		for _, u := range req.Users {
			users = append(users, u.Name)
		}
	}
	counts := map[string]int{}
	for _, u := range users {
		counts[u]++
	}
	for _, user := range users {
		result := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		result.User = user
		switch {
		case counts[user] > 1:
			result.ErrorCode = protocol.DuplicateResource.Code
		case len(security.Credentials[user]) == 0:
			result.ErrorCode = protocol.ResourceNotFound.Code
		default:
			for _, m := range scram.Mechanisms {
				if c, ok := security.Credential(user, m); ok {
					info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
					info.Mechanism, info.Iterations = int8(m), int32(c.Iterations)
					result.CredentialInfos = append(result.CredentialInfos, info)
				}
			}
		}
		if result.ErrorCode != 0 {
			message := protocol.ErrorCodeOf(result.ErrorCode).Name
			result.ErrorMessage = &message
		}
		resp.Results = append(resp.Results, result)
	}
	r.respond(resp)
}

func (b *Broker) handleAlterUserScramCredentials(r *request, req *kmsg.AlterUserSCRAMCredentialsRequest) {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	codes := map[string]protocol.ErrorCode{}
	var order []string
	mentions := map[string]int{}
	note := func(user string) {
		if mentions[user] == 0 {
			order = append(order, user)
		}
		mentions[user]++
	}
	for _, d := range req.Deletions {
		note(d.Name)
	}
	for _, u := range req.Upsertions {
		note(u.Name)
	}
	var upserts []coordinator.CredentialUpsert
	var deletions []coordinator.CredentialDeletion
	for _, d := range req.Deletions {
		switch m := scram.Mechanism(d.Mechanism); {
		case d.Name == "":
			codes[d.Name] = protocol.UnacceptableCredential
		case mentions[d.Name] > 1:
			codes[d.Name] = protocol.DuplicateResource
		case !m.Valid():
			codes[d.Name] = protocol.UnsupportedSASLMechanism
		default:
			deletions = append(deletions, coordinator.CredentialDeletion{User: d.Name, Mechanism: m})
		}
	}
	for _, u := range req.Upsertions {
		m := scram.Mechanism(u.Mechanism)
		switch {
		case u.Name == "":
			codes[u.Name] = protocol.UnacceptableCredential
			continue
		case mentions[u.Name] > 1:
			codes[u.Name] = protocol.DuplicateResource
			continue
		case !m.Valid():
			codes[u.Name] = protocol.UnsupportedSASLMechanism
			continue
		}
		credential, err := scram.CredentialFromSalted(m, u.SaltedPassword, u.Salt, int(u.Iterations))
		if err != nil {
			codes[u.Name] = protocol.UnacceptableCredential
			continue
		}
		upserts = append(upserts, coordinator.CredentialUpsert{User: u.Name, Credential: credential})
	}
	if len(upserts)+len(deletions) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), securityWriteTimeout)
		missing, err := b.coordinator.AlterScramCredentials(ctx, upserts, deletions)
		cancel()
		for i, d := range deletions {
			if err == nil && i < len(missing) && missing[i] != nil {
				codes[d.User] = protocol.ResourceNotFound
			}
		}
		if err != nil {
			code := protocol.ErrorCodeOf(adminErrorCode(err))
			for _, u := range upserts {
				codes[u.User] = code
			}
			for _, d := range deletions {
				codes[d.User] = code
			}
		}
	}
	for _, user := range slices.Compact(order) {
		result := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		result.User = user
		if code, ok := codes[user]; ok && code != protocol.None {
			result.ErrorCode = code.Code
			message := code.Name
			result.ErrorMessage = &message
			r.failed()
		}
		resp.Results = append(resp.Results, result)
	}
	r.respond(resp)
}
