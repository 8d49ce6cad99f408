package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/client"
)

// session is one command's connection to the cluster: sluice's client for topics, producing,
// consuming and offsets, and a franz-go client for the requests client/ has no call for yet
// (consumer-group administration, CreatePartitions, the cluster view). Neither dials before its
// first request.
type session struct {
	globals globals
	client  *client.Client
	raw     *kgo.Client
}

// connect checks that a seed broker accepts connections, so an unreachable cluster fails at once
// with one clear line instead of after the client's retries, and returns a session.
func connect(ctx context.Context, g globals) (*session, error) {
	brokers := g.brokerList()
	dialTimeout := min(g.timeout, 5*time.Second)
	var dialErrs []error
	reachable := false
	for _, address := range brokers {
		dialer := net.Dialer{Timeout: dialTimeout}
		conn, err := dialer.DialContext(ctx, "tcp", address)
		if err == nil {
			conn.Close()
			reachable = true
			break
		}
		dialErrs = append(dialErrs, err)
	}
	if !reachable {
		cause := errors.Join(dialErrs...)
		var opErr *net.OpError
		if errors.As(cause, &opErr) && opErr.Err != nil {
			cause = opErr.Err // "connection refused" reads better than the whole dial chain
		}
		return nil, &unreachableError{brokers: brokers, cause: cause}
	}
	clientSecurity, err := g.security.clientOptions()
	if err != nil {
		return nil, usageErrorf("sluice", "%v", err)
	}
	kgoSecurity, err := g.security.kgoOptions()
	if err != nil {
		return nil, usageErrorf("sluice", "%v", err)
	}
	c, err := client.New(append([]client.Option{client.WithSeedBrokers(brokers...), client.WithClientID("sluice-cli"),
		client.WithDialTimeout(dialTimeout), client.WithRequestTimeout(g.timeout)}, append(clientSecurity, g.sasl.clientOptions()...)...)...)
	if err != nil {
		return nil, err
	}
	raw, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID("sluice-cli"),
		kgo.DialTimeout(dialTimeout), kgo.RetryTimeout(g.timeout)}, append(kgoSecurity, g.sasl.kgoOptions()...)...)...)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("franz-go client: %w", err)
	}
	return &session{globals: g, client: c, raw: raw}, nil
}

func (s *session) admin() *client.Admin { return client.NewAdmin(s.client) }

func (s *session) Close() {
	s.raw.Close()
	s.client.Close()
}

// open connects (see connect) and bounds the command's requests by --timeout; done releases both.
func open(ctx context.Context, g globals) (s *session, requests context.Context, done func(), err error) {
	if s, err = connect(ctx, g); err != nil {
		return nil, nil, nil, err
	}
	requests, cancel := s.requestContext(ctx)
	return s, requests, func() { cancel(); s.Close() }, nil
}

// requestContext bounds one command's requests by --timeout.
func (s *session) requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.globals.timeout)
}
