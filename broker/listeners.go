package broker

// Named listeners (issue 14). A broker serves one or more listeners, each a name, a security
// protocol and an address (Config.Listeners; without them, one PLAINTEXT listener on
// Config.Listen). Each advertises a host:port (Config.AdvertisedListeners, else its bound
// address), and the broker registers all of them with the controller
// (coordinator.Broker.Endpoints), the inter-broker listener's as Host and Port. Metadata,
// FindCoordinator, DescribeCluster and the share-group endpoints answer every broker's address
// on the listener the request came in on, so a client that reached the cluster through the
// CLIENT listener keeps using CLIENT addresses; a broker registered without that listener is
// given by its Host and Port.
//
// The inter-broker listener's security applies to everything brokers send each other: the
// followers' fetch connections and the transaction-marker client dial it with
// Config.InterBrokerTLS, and when it uses TLS the Raft port (Raft RPCs and forwarded calls,
// heartbeats included) uses Config.RaftTLS and InterBrokerTLS as well. SASL on the
// inter-broker listener is refused by Validate: brokers have no SASL credentials yet.

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/sluice-mq/sluice/coordinator"
	"github.com/sluice-mq/sluice/listener"
	"github.com/sluice-mq/sluice/netpoll"
)

// legacyListenerName is the listener Config.Listen stands for.
const legacyListenerName = "PLAINTEXT"

// listenerSpecs is Listeners, or the single PLAINTEXT listener on Listen.
func (c Config) listenerSpecs() []listener.Spec {
	if len(c.Listeners) > 0 {
		return c.Listeners
	}
	return []listener.Spec{{Name: legacyListenerName, Protocol: listener.Plaintext, Address: c.Listen}}
}

// interBrokerSpec is the listener other brokers dial.
func (c Config) interBrokerSpec() listener.Spec {
	specs := c.listenerSpecs()
	for _, spec := range specs {
		if spec.Name == c.InterBrokerListener {
			return spec
		}
	}
	return specs[0]
}

func (c Config) validateListeners() []error {
	var errs []error
	specs := c.listenerSpecs()
	names := map[string]bool{}
	anyTLS := false
	for _, spec := range specs {
		if _, _, err := net.SplitHostPort(spec.Address); err != nil {
			errs = append(errs, fmt.Errorf("listener %s address %q: %w", spec.Name, spec.Address, err))
		}
		if names[spec.Name] {
			errs = append(errs, fmt.Errorf("listener %s given twice", spec.Name))
		}
		names[spec.Name] = true
		anyTLS = anyTLS || spec.Protocol.TLS()
	}
	if anyTLS && c.TLS == nil {
		errs = append(errs, fmt.Errorf("a TLS listener needs a TLS certificate (--tls-cert, --tls-key)"))
	}
	for name, address := range c.AdvertisedListeners {
		if !names[name] {
			errs = append(errs, fmt.Errorf("advertised listener %s is not a listener", name))
		}
		if _, err := splitAdvertise(address); err != nil {
			errs = append(errs, err)
		}
	}
	if c.InterBrokerListener != "" && !names[c.InterBrokerListener] {
		errs = append(errs, fmt.Errorf("inter-broker listener %s is not a listener", c.InterBrokerListener))
	}
	interBroker := c.interBrokerSpec()
	if interBroker.Protocol.SASL() && c.Security.InterBrokerUser == "" && len(c.ControllerVoters) > 1 {
		// A single node never dials its own inter-broker listener; a cluster's brokers must log in.
		errs = append(errs, fmt.Errorf("inter-broker listener %s is %s: brokers need --inter-broker-sasl-user and --inter-broker-sasl-password to authenticate to each other",
			interBroker.Name, interBroker.Protocol))
	}
	if interBroker.Protocol.TLS() && (c.InterBrokerTLS == nil || c.RaftTLS == nil) {
		errs = append(errs, fmt.Errorf("inter-broker listener %s is %s: the broker needs client and Raft TLS configs", interBroker.Name, interBroker.Protocol))
	}
	return errs
}

// netListeners is what netpoll binds.
func (c Config) netListeners() []netpoll.ListenerConfig {
	var out []netpoll.ListenerConfig
	for _, spec := range c.listenerSpecs() {
		var tlsConfig *tls.Config
		if spec.Protocol.TLS() {
			tlsConfig = c.TLS
		}
		out = append(out, netpoll.ListenerConfig{
			Name: spec.Name, SecurityProtocol: string(spec.Protocol), Address: spec.Address, TLS: tlsConfig,
		})
	}
	return out
}

// listenerEndpoints are this broker's advertised addresses, resolved once it listens.
type listenerEndpoints struct {
	names     []string // in configuration order
	addresses map[string]hostPort
	text      string // as registered: "NAME://host:port,..."
}

// resolveEndpoints fills b.endpoints and b.advertised (the inter-broker listener's address)
// from the bound listeners and Config.AdvertisedListeners (or Advertise, for the legacy one).
func (b *Broker) resolveEndpoints() error {
	cfg := b.config
	endpoints := listenerEndpoints{addresses: map[string]hostPort{}}
	texts := map[string]string{}
	for _, spec := range cfg.listenerSpecs() {
		advertise := cfg.AdvertisedListeners[spec.Name]
		if advertise == "" && len(cfg.Listeners) == 0 {
			advertise = cfg.Advertise
		}
		address, err := advertisedAddress(advertise, b.server.ListenerAddr(spec.Name))
		if err != nil {
			return fmt.Errorf("broker: listener %s: %w", spec.Name, err)
		}
		endpoints.names = append(endpoints.names, spec.Name)
		endpoints.addresses[spec.Name] = address
		texts[spec.Name] = net.JoinHostPort(address.host, strconv.Itoa(int(address.port)))
	}
	endpoints.text = listener.FormatEndpoints(endpoints.names, texts)
	b.endpoints = endpoints
	b.advertised = endpoints.addresses[cfg.interBrokerSpec().Name]
	return nil
}

// endpointCache remembers the parsed Endpoints of registrations (they change rarely).
type endpointCache struct {
	mu     sync.Mutex
	parsed map[string]map[string]hostPort
}

func (e *endpointCache) lookup(text string) map[string]hostPort {
	e.mu.Lock()
	defer e.mu.Unlock()
	if parsed, ok := e.parsed[text]; ok {
		return parsed
	}
	if e.parsed == nil || len(e.parsed) > 1024 {
		e.parsed = map[string]map[string]hostPort{}
	}
	parsed := map[string]hostPort{}
	if _, addresses, err := listener.ParseEndpoints(text); err == nil {
		for name, address := range addresses {
			if hp, err := splitAdvertise(address); err == nil {
				parsed[name] = hp
			}
		}
	}
	e.parsed[text] = parsed
	return parsed
}

// endpointFor is broker's advertised address on the listener r came in on.
func (b *Broker) endpointFor(r *request, broker coordinator.Broker) (string, int32) {
	if r == nil || r.session == nil || r.session.conn == nil || broker.Endpoints == "" {
		return broker.Host, broker.Port
	}
	name, _ := r.session.conn.Listener()
	if address, ok := b.endpointsOfOthers.lookup(broker.Endpoints)[name]; ok {
		return address.host, address.port
	}
	return broker.Host, broker.Port
}

// boundListeners is Kafka's listeners config value with the ports bound.
func (b *Broker) boundListeners() string {
	texts := map[string]string{}
	for _, name := range b.endpoints.names {
		if address := b.server.ListenerAddr(name); address != nil {
			texts[name] = address.String()
		}
	}
	return listener.FormatEndpoints(b.endpoints.names, texts)
}
