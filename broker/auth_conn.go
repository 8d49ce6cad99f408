package broker

import (
	"github.com/sluice-mq/sluice/netpoll"
)

// connectionSecurity is what the listener a connection arrived on says about its security: whether
// it must authenticate with SASL before anything else (a SASL_PLAINTEXT or SASL_SSL listener, or
// every listener with SecurityConfig.RequireSASL), and the principal its TLS client certificate
// proves ("User:CN=...", empty without mTLS).
func (b *Broker) connectionSecurity(conn *netpoll.Conn) (needSASL bool, tlsPrincipal string) {
	_, protocol := conn.Listener()
	needSASL = b.config.Security.RequireSASL || protocol == "SASL_PLAINTEXT" || protocol == "SASL_SSL"
	return needSASL, conn.TLSPeerPrincipal()
}

// authorizerEnabled: the configured switch, or any listener that authenticates with SASL.
func (c Config) authorizerEnabled() bool {
	if c.Security.AuthorizerEnabled() {
		return true
	}
	for _, spec := range c.listenerSpecs() {
		if spec.Protocol.SASL() {
			return true
		}
	}
	return false
}
