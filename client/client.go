package client

import (
	"errors"
	"fmt"
	"sync"
)

// Client holds the connections to a cluster and its metadata. Producers, consumers and Admin share
// one Client; it is safe for concurrent use. Close it after them.
type Client struct {
	cfg      clientConfig
	pool     *brokerPool
	metadata *metadataCache

	stop      chan struct{}
	closeOnce sync.Once
	loops     sync.WaitGroup // background metadata refresh
}

// New returns a client for the cluster reached through the seed brokers. It does not connect:
// the first request does.
func New(opts ...Option) (*Client, error) {
	cfg := defaultClientConfig()
	for _, opt := range opts {
		opt(&cfg)
	}
	var errs []error
	if len(cfg.seeds) == 0 {
		errs = append(errs, errors.New("no seed brokers"))
	}
	if cfg.dialTimeout <= 0 || cfg.requestTimeout <= 0 || cfg.metadataMaxAge <= 0 {
		errs = append(errs, errors.New("timeouts and metadata max age must be positive"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("client: invalid options: %w", err)
	}
	c := &Client{cfg: cfg, stop: make(chan struct{})}
	c.pool = newBrokerPool(&c.cfg)
	c.metadata = newMetadataCache(c)
	c.loops.Add(1)
	go func() {
		defer c.loops.Done()
		c.metadata.run(c.stop)
	}()
	return c, nil
}

// Close closes every connection. Producers and consumers using the client must be closed first;
// requests still in flight fail with ErrNetwork.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		close(c.stop)
		c.loops.Wait()
		c.pool.close()
	})
	return nil
}
