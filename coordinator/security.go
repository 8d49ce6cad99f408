package coordinator

import (
	"maps"
	"slices"
	"strings"

	"github.com/sluice-mq/sluice/acl"
	"github.com/sluice-mq/sluice/scram"
)

// Security is the replicated authentication and authorization state: the ACL bindings
// (CreateAcls/DeleteAcls) and the users' SCRAM credentials (AlterUserScramCredentials). Like the
// offsets it is kept apart from Metadata: changing it bumps neither Metadata.Version nor wakes
// subscribers; readers load it atomically (Coordinator.Security) at each decision.
//
// Invariant: a Security value is immutable once published; ACLs is never nil.
type Security struct {
	// Index is the Raft index of the last change applied (0: none yet).
	Index uint64
	ACLs  *acl.Set
	// Credentials holds each user's credentials by mechanism; passwords are never stored.
	Credentials map[string]map[scram.Mechanism]scram.Credential
}

func emptySecurity() *Security {
	return &Security{ACLs: acl.NewSet(nil), Credentials: map[string]map[scram.Mechanism]scram.Credential{}}
}

// Credential returns user's credential for mechanism m.
func (s *Security) Credential(user string, m scram.Mechanism) (scram.Credential, bool) {
	c, ok := s.Credentials[user][m]
	return c, ok
}

// Users returns the users with at least one credential, sorted.
func (s *Security) Users() []string { return slices.Sorted(maps.Keys(s.Credentials)) }

// securityFile is Security in a snapshot, in a stable order.
type securityFile struct {
	Index       uint64             `json:"index"`
	ACLs        []acl.Binding      `json:"acls,omitempty"`
	Credentials []storedCredential `json:"credentials,omitempty"`
}

type storedCredential struct {
	User string `json:"user"`
	scram.Credential
}

func (s *Security) file() securityFile {
	file := securityFile{Index: s.Index, ACLs: s.ACLs.Bindings()}
	for _, user := range s.Users() {
		for _, m := range slices.Sorted(maps.Keys(s.Credentials[user])) {
			file.Credentials = append(file.Credentials, storedCredential{User: user, Credential: s.Credentials[user][m]})
		}
	}
	return file
}

func (f securityFile) state() *Security {
	s := emptySecurity()
	s.Index = f.Index
	s.ACLs = acl.NewSet(f.ACLs)
	for _, c := range f.Credentials {
		if s.Credentials[c.User] == nil {
			s.Credentials[c.User] = map[scram.Mechanism]scram.Credential{}
		}
		s.Credentials[c.User][c.Mechanism] = c.Credential
	}
	return s
}

// validUserName: Kafka refuses empty SCRAM user names; sluice also refuses control characters,
// which no log line or CLI table could show.
func validUserName(user string) bool {
	return user != "" && !strings.ContainsFunc(user, func(r rune) bool { return r < 0x20 || r == 0x7f })
}
