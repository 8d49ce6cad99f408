package broker

import (
	"github.com/sluice-mq/sluice/netpoll"
)

// connectionSecurity is what the listener a connection arrived on says about its security: whether
// it must authenticate with SASL before anything else, and the principal its TLS client
// certificate proves ("User:CN=...", empty without mTLS).
//
// Until connections carry their listener (netpoll.Conn.Listener and TLSPeerPrincipal), the one
// listener's protocol is SecurityConfig.RequireSASL. With them this becomes:
//
//	_, protocol := conn.Listener()
//	return protocol == "SASL_PLAINTEXT" || protocol == "SASL_SSL", conn.TLSPeerPrincipal()
func (b *Broker) connectionSecurity(conn *netpoll.Conn) (needSASL bool, tlsPrincipal string) {
	return b.config.Security.RequireSASL, ""
}
