package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/sluice-mq/sluice/broker"
)

// securityFlags registers the SASL and ACL flags on fs; finish, called after parsing, reads the
// PLAIN users file and splits the lists.
func securityFlags(fs *flag.FlagSet, b *broker.Config) (finish func() error) {
	var mechanisms, plainUsersFile, superUsers string
	s := &b.Security
	fs.BoolVar(&s.RequireSASL, "require-sasl", false, "clients must authenticate with SASL before anything else (the listener is SASL_PLAINTEXT); turns the authorizer on")
	fs.StringVar(&mechanisms, "sasl-mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", "enabled SASL mechanisms, comma-separated")
	fs.StringVar(&plainUsersFile, "sasl-plain-users", "", "file of SASL/PLAIN users, one user:password a line (# comments); PLAIN also accepts SCRAM users")
	fs.DurationVar(&s.ConnectionsMaxReauth, "connections-max-reauth", 0, "connections.max.reauth.ms as a duration: SASL sessions last this long, then the client must re-authenticate (0: forever)")
	fs.BoolVar(&s.Authorizer, "authorizer", false, "check requests against ACLs even without SASL (unauthenticated clients are User:ANONYMOUS)")
	fs.StringVar(&superUsers, "super-users", "", "principals allowed everything, semicolon-separated (User:admin;User:broker)")
	fs.BoolVar(&s.AllowEveryoneIfNoACL, "allow-everyone-if-no-acl-found", false, "allow requests on resources no ACL applies to (allow.everyone.if.no.acl.found)")
	fs.StringVar(&s.InterBrokerMechanism, "inter-broker-sasl-mechanism", "SCRAM-SHA-512", "SASL mechanism this broker uses towards other brokers")
	fs.StringVar(&s.InterBrokerUser, "inter-broker-sasl-user", "", "SASL user this broker authenticates as towards other brokers (a super user or one with CLUSTER_ACTION)")
	fs.StringVar(&s.InterBrokerPassword, "inter-broker-sasl-password", "", "password of --inter-broker-sasl-user")
	return func() error {
		s.Mechanisms = splitList(mechanisms, ",")
		s.SuperUsers = splitList(superUsers, ";")
		if plainUsersFile != "" {
			users, err := readPlainUsers(plainUsersFile)
			if err != nil {
				return err
			}
			s.PlainUsers = users
		}
		return nil
	}
}

func splitList(text, separator string) []string {
	var out []string
	for _, item := range strings.Split(text, separator) {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// readPlainUsers reads user:password lines; blank lines and lines starting with # are skipped.
func readPlainUsers(path string) (map[string]string, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--sasl-plain-users: %w", err)
	}
	defer file.Close()
	users := map[string]string{}
	scanner := bufio.NewScanner(file)
	for line := 1; scanner.Scan(); line++ {
		text := strings.TrimRight(scanner.Text(), "\r")
		if strings.TrimSpace(text) == "" || strings.HasPrefix(strings.TrimSpace(text), "#") {
			continue
		}
		user, password, ok := strings.Cut(text, ":")
		if !ok || user == "" {
			return nil, fmt.Errorf("--sasl-plain-users: %s line %d is not user:password", path, line)
		}
		users[user] = password
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("--sasl-plain-users: %w", err)
	}
	return users, nil
}
