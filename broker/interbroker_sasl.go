package broker

// Inter-broker SASL: when SecurityConfig.InterBrokerUser is set, this broker authenticates its own
// connections to other brokers (follower fetches through replication.Config.Authenticate, transaction
// markers through the marker client) as that user. The user must be a super user or hold
// CLUSTER_ACTION on the cluster for follower fetches (authorize.go).

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	franzscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/protocol"
	"github.com/sluice-mq/sluice/scram"
)

// interBrokerKgoOptions authenticate franz-go clients this broker uses towards other brokers.
func (b *Broker) interBrokerKgoOptions() []kgo.Opt {
	s := b.config.Security
	if s.InterBrokerUser == "" {
		return nil
	}
	switch s.InterBrokerMechanism {
	case MechanismPlain:
		return []kgo.Opt{kgo.SASL(plain.Auth{User: s.InterBrokerUser, Pass: s.InterBrokerPassword}.AsMechanism())}
	case MechanismScramSHA256:
		return []kgo.Opt{kgo.SASL(franzscram.Auth{User: s.InterBrokerUser, Pass: s.InterBrokerPassword}.AsSha256Mechanism())}
	}
	return []kgo.Opt{kgo.SASL(franzscram.Auth{User: s.InterBrokerUser, Pass: s.InterBrokerPassword}.AsSha512Mechanism())}
}

// interBrokerAuthenticate runs the SASL exchange as the inter-broker user (SaslHandshake v1,
// SaslAuthenticate v1) on a fresh connection to another broker, before replication uses it.
func (b *Broker) interBrokerAuthenticate(conn net.Conn) error {
	s := b.config.Security
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID(fmt.Sprintf("sluice-broker-%d", b.config.NodeID)))
	correlation := int32(0)
	roundTrip := func(req kmsg.Request, resp kmsg.Response) error {
		correlation++
		if _, err := conn.Write(formatter.AppendRequest(nil, req, correlation)); err != nil {
			return err
		}
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return err
		}
		n := binary.BigEndian.Uint32(size[:])
		if n > 1<<20 {
			return fmt.Errorf("SASL response of %d bytes", n)
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(conn, frame); err != nil {
			return err
		}
		_, body, err := protocol.ParseResponse(frame, req.Key(), req.GetVersion())
		if err != nil {
			return err
		}
		resp.SetVersion(req.GetVersion())
		return resp.ReadFrom(body)
	}
	handshake := kmsg.NewPtrSASLHandshakeRequest()
	handshake.Version, handshake.Mechanism = 1, s.InterBrokerMechanism
	handshakeResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := roundTrip(handshake, handshakeResp); err != nil {
		return err
	}
	if handshakeResp.ErrorCode != 0 {
		return protocol.ErrorCodeOf(handshakeResp.ErrorCode)
	}
	step := func(token []byte) ([]byte, error) {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 1, token
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := roundTrip(req, resp); err != nil {
			return nil, err
		}
		if resp.ErrorCode != 0 {
			return nil, protocol.ErrorCodeOf(resp.ErrorCode)
		}
		return resp.SASLAuthBytes, nil
	}
	if s.InterBrokerMechanism == MechanismPlain {
		_, err := step([]byte("\x00" + s.InterBrokerUser + "\x00" + s.InterBrokerPassword))
		return err
	}
	m, _ := scram.ParseMechanism(s.InterBrokerMechanism)
	client := scram.NewClient(m, s.InterBrokerUser, s.InterBrokerPassword)
	serverFirst, err := step(client.First())
	if err != nil {
		return err
	}
	final, err := client.Final(serverFirst)
	if err != nil {
		return err
	}
	serverFinal, err := step(final)
	if err != nil {
		return err
	}
	return client.Verify(serverFinal)
}
