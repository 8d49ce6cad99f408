package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/client"
)

// kafkaClients are the Kafka clients one identity of the console uses: the shared ones (no
// login, or the sampler's principal) or one logged-in session's.
type kafkaClients struct {
	raw    *kgo.Client    // franz-go, for the requests client/ has no call for
	client *client.Client // sluice's client: the message browser and topic admin
	// messages holds the message browser's consumer while no page uses it: one page reads at a
	// time (a Consumer per page would cost connections, and client.Client keeps every consumer
	// it made until it closes).
	messages chan *client.Consumer
}

// credentials are a SASL user and password; the zero value means no SASL.
type credentials struct {
	mechanism, user, password string
}

// newKafkaClients makes the clients (they dial on first use) of one identity.
func newKafkaClients(cfg Config, clientID string, login credentials) (*kafkaClients, error) {
	franzOptions := append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.ClientID(clientID),
		kgo.RetryTimeout(cfg.RequestTimeout), kgo.DialTimeout(min(cfg.RequestTimeout, 5*time.Second))}, cfg.FranzOptions...)
	clientOptions := append([]client.Option{client.WithSeedBrokers(cfg.Brokers...), client.WithClientID(clientID),
		client.WithRequestTimeout(cfg.RequestTimeout)}, cfg.ClientOptions...)
	if login.user != "" {
		mechanism, err := franzSASL(login)
		if err != nil {
			return nil, err
		}
		franzOptions = append(franzOptions, kgo.SASL(mechanism))
		clientOptions = append(clientOptions, client.WithSASL(login.mechanism, login.user, login.password))
	}
	k := &kafkaClients{}
	var err error
	if k.raw, err = kgo.NewClient(franzOptions...); err != nil {
		return nil, fmt.Errorf("console: franz-go client: %w", err)
	}
	if k.client, err = client.New(clientOptions...); err != nil {
		k.raw.Close()
		return nil, fmt.Errorf("console: client: %w", err)
	}
	consumer, err := client.NewConsumer(k.client, client.WithFetchMaxWait(200*time.Millisecond),
		client.WithConsumerBufferBytes(4<<20), client.WithFetchMaxPartitionBytes(1<<20))
	if err != nil {
		k.client.Close()
		k.raw.Close()
		return nil, fmt.Errorf("console: consumer: %w", err)
	}
	k.messages = make(chan *client.Consumer, 1)
	k.messages <- consumer
	return k, nil
}

func franzSASL(login credentials) (sasl.Mechanism, error) {
	switch login.mechanism {
	case client.SASLPlain:
		return plain.Auth{User: login.user, Pass: login.password}.AsMechanism(), nil
	case client.SASLScramSHA256:
		return scram.Auth{User: login.user, Pass: login.password}.AsSha256Mechanism(), nil
	case client.SASLScramSHA512:
		return scram.Auth{User: login.user, Pass: login.password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("console: SASL mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", login.mechanism)
}

// close waits for a page still reading messages, then closes the clients.
func (k *kafkaClients) close() error {
	consumer := <-k.messages
	consumer.Close()
	k.raw.Close()
	return k.client.Close()
}

type kafkaKey struct{}

// withKafka returns r carrying the clients its handler must use.
func withKafka(r *http.Request, k *kafkaClients) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), kafkaKey{}, k))
}

// kafkaOf returns the clients of r's identity (set by ServeHTTP before any handler runs).
func kafkaOf(r *http.Request) *kafkaClients {
	k, _ := r.Context().Value(kafkaKey{}).(*kafkaClients)
	if k == nil {
		panic("console: a handler ran without Kafka clients") // ServeHTTP sets them for every page
	}
	return k
}

// statusOf is the HTTP status for a failed Kafka request: 403 when the broker refused it for
// the principal, 502 otherwise.
func statusOf(err error) int {
	for _, refusal := range []*kerr.Error{kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed,
		kerr.ClusterAuthorizationFailed, kerr.TransactionalIDAuthorizationFailed, kerr.DelegationTokenAuthorizationFailed} {
		if errors.Is(err, refusal) {
			return http.StatusForbidden
		}
	}
	var kafkaErr *client.KafkaError
	if errors.As(err, &kafkaErr) {
		switch kafkaErr.Code {
		case kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code:
			return http.StatusForbidden
		}
	}
	return http.StatusBadGateway
}
