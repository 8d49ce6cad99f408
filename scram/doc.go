// Package scram implements SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka uses them
// for SASL authentication: the server side of the exchange, the client side, and the salted
// credentials a server stores instead of passwords.
//
// A server stores, per user and mechanism, only
//
//	salt, iterations, StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key")
//
// where SaltedPassword = PBKDF2(HMAC-H, password, salt, iterations). Neither key lets anyone
// authenticate as the user; StoredKey verifies a client's proof, ServerKey signs the server's final
// message.
//
// Invariants: a server conversation never reveals whether the user or the password was wrong (an
// unknown user gets a made-up salt derived from the name, and the exchange fails at the proof, as
// a wrong password does); proofs are compared in constant time. The package does no I/O and holds
// no global mutable state.
package scram
