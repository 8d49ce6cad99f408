package listener

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// SecurityProtocol is Kafka's name for what a listener wraps its connections in.
type SecurityProtocol string

const (
	Plaintext     SecurityProtocol = "PLAINTEXT"
	SSL           SecurityProtocol = "SSL"
	SASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	SASLSSL       SecurityProtocol = "SASL_SSL"
)

// TLS reports whether connections on the listener are TLS.
func (p SecurityProtocol) TLS() bool { return p == SSL || p == SASLSSL }

// SASL reports whether clients must authenticate with SASL on the listener.
func (p SecurityProtocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

func parseProtocol(text string) (SecurityProtocol, bool) {
	switch p := SecurityProtocol(strings.ToUpper(strings.TrimSpace(text))); p {
	case Plaintext, SSL, SASLPlaintext, SASLSSL:
		return p, true
	}
	return "", false
}

// Spec is one named listener.
type Spec struct {
	// Name is the listener's name, upper case (CLIENT, INTERNAL, PLAINTEXT, ...).
	Name string
	// Protocol is its security protocol.
	Protocol SecurityProtocol
	// Address is where it binds, host:port; port 0 picks an ephemeral port.
	Address string
}

// ErrInvalid is wrapped by every error this package's parsers return.
var ErrInvalid = errors.New("listener: invalid")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// ParseEndpoints parses "NAME://host:port,NAME://host:port" into name -> host:port, in order.
// Names are upper-cased; a name may appear once.
func ParseEndpoints(text string) (names []string, addresses map[string]string, err error) {
	addresses = map[string]string{}
	for _, item := range strings.Split(text, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, address, ok := strings.Cut(item, "://")
		name = strings.ToUpper(strings.TrimSpace(name))
		if !ok || name == "" {
			return nil, nil, invalid("listener %q: want NAME://host:port", item)
		}
		if _, _, err := net.SplitHostPort(address); err != nil {
			return nil, nil, invalid("listener %q: %v", item, err)
		}
		if _, dup := addresses[name]; dup {
			return nil, nil, invalid("listener name %s given twice", name)
		}
		names = append(names, name)
		addresses[name] = address
	}
	return names, addresses, nil
}

// ParseProtocolMap parses "NAME:PROTOCOL,NAME:PROTOCOL".
func ParseProtocolMap(text string) (map[string]SecurityProtocol, error) {
	protocols := map[string]SecurityProtocol{}
	for _, item := range strings.Split(text, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, protocolText, ok := strings.Cut(item, ":")
		name = strings.ToUpper(strings.TrimSpace(name))
		protocol, known := parseProtocol(protocolText)
		if !ok || name == "" {
			return nil, invalid("security protocol map entry %q: want NAME:PROTOCOL", item)
		}
		if !known {
			return nil, invalid("security protocol map entry %q: protocol must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", item)
		}
		protocols[name] = protocol
	}
	return protocols, nil
}

// Parse turns the --listeners and --listener-security-protocol-map texts into Specs, in the
// order given. A listener not in the map must be named after its protocol.
func Parse(listeners, protocolMap string) ([]Spec, error) {
	names, addresses, err := ParseEndpoints(listeners)
	if err != nil {
		return nil, err
	}
	protocols, err := ParseProtocolMap(protocolMap)
	if err != nil {
		return nil, err
	}
	specs := make([]Spec, 0, len(names))
	for _, name := range names {
		protocol, ok := protocols[name]
		if !ok {
			if protocol, ok = parseProtocol(name); !ok {
				return nil, invalid("listener %s has no entry in the security protocol map", name)
			}
		}
		specs = append(specs, Spec{Name: name, Protocol: protocol, Address: addresses[name]})
	}
	for name := range protocols {
		if _, ok := addresses[name]; !ok {
			return nil, invalid("security protocol map names %s, which is not a listener", name)
		}
	}
	return specs, nil
}

// FormatEndpoints writes name -> host:port as "NAME://host:port,..." in the order of names.
func FormatEndpoints(names []string, addresses map[string]string) string {
	parts := make([]string, 0, len(names))
	for _, name := range names {
		if address, ok := addresses[name]; ok {
			parts = append(parts, name+"://"+address)
		}
	}
	return strings.Join(parts, ",")
}
