// Package listener describes sluice's named Kafka listeners and the TLS material they use.
//
// A listener is a name, a security protocol and an address, written as Kafka writes them:
//
//	--listeners CLIENT://0.0.0.0:9092,INTERNAL://127.0.0.1:9093
//	--listener-security-protocol-map CLIENT:SASL_SSL,INTERNAL:SSL
//	--advertised-listeners CLIENT://broker1.example:9092,INTERNAL://10.0.0.1:9093
//
// A listener named after a protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) needs no entry in
// the map. The package parses these and checks them (Parse); it opens no socket.
//
// TLS material (certificate, key, CA bundle for client certificates) is held by a Reloader,
// which serves tls.Configs that always use the newest good files: new handshakes see a new
// certificate as soon as Reload ran (on SIGHUP, or when the files' modification time or size
// changed, checked every poll interval); handshakes already done keep theirs. A reload that
// fails (unreadable file, key not matching the certificate) keeps the previous material and
// is logged and counted.
//
// Invariants: every Spec returned by Parse has a unique name, a known protocol and an address
// with a port; TLS configs from a Reloader never allow a version below TLS 1.2.
//
// Locks: Reloader.mu guards only the reload step (file reads happen under it, so two reloads
// never interleave); the material itself is an atomic pointer read without a lock.
package listener
