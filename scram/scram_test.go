package scram

import (
	"encoding/base64"
	"errors"
	"testing"
)

// RFC 7677 section 3: user "user", password "pencil", SCRAM-SHA-256.
const (
	rfcClientNonce = "rOprNGfwEbeRWgbNEkqO"
	rfcServerNonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	rfcSalt        = "W22ZaJ0SNY7soEsUEjb6gQ=="
	rfcClientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
	rfcServerFirst = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	rfcClientFinal = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
	rfcServerFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
)

func rfcCredential(t *testing.T) Credential {
	salt, _ := base64.StdEncoding.DecodeString(rfcSalt)
	salted, err := SHA256.SaltedPassword("pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	c, err := CredentialFromSalted(SHA256, salted, salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRFC7677VectorClientAndServer(t *testing.T) {
	credential := rfcCredential(t)
	client := NewClient(SHA256, "user", "pencil")
	client.SetNonce(rfcClientNonce)
	if got := string(client.First()); got != rfcClientFirst {
		t.Fatalf("client first %q, want %q", got, rfcClientFirst)
	}
	server := NewServer(SHA256, func(user string) (Credential, bool) { return credential, user == "user" }, []byte("k"))
	server.SetNonce(func() string { return rfcServerNonce })
	serverFirst, err := server.Step([]byte(rfcClientFirst))
	if err != nil || string(serverFirst) != rfcServerFirst {
		t.Fatalf("server first %q, %v; want %q", serverFirst, err, rfcServerFirst)
	}
	clientFinal, err := client.Final(serverFirst)
	if err != nil || string(clientFinal) != rfcClientFinal {
		t.Fatalf("client final %q, %v; want %q", clientFinal, err, rfcClientFinal)
	}
	serverFinal, err := server.Step(clientFinal)
	if err != nil || string(serverFinal) != rfcServerFinal {
		t.Fatalf("server final %q, %v; want %q", serverFinal, err, rfcServerFinal)
	}
	if !server.Done() || server.User() != "user" {
		t.Fatalf("server done %v user %q", server.Done(), server.User())
	}
	if err := client.Verify(serverFinal); err != nil {
		t.Fatal(err)
	}
}

func exchange(t *testing.T, m Mechanism, stored map[string]Credential, user, password string) error {
	t.Helper()
	client := NewClient(m, user, password)
	server := NewServer(m, func(u string) (Credential, bool) { c, ok := stored[u]; return c, ok }, []byte("secret"))
	serverFirst, err := server.Step(client.First())
	if err != nil {
		return err
	}
	clientFinal, err := client.Final(serverFirst)
	if err != nil {
		t.Fatal(err)
	}
	serverFinal, err := server.Step(clientFinal)
	if err != nil {
		return err
	}
	return client.Verify(serverFinal)
}

func TestExchangeBothMechanismsAndRefusals(t *testing.T) {
	for _, m := range Mechanisms {
		credential, err := NewCredential(m, "s3cret", MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		stored := map[string]Credential{"alice,=": credential}
		if err := exchange(t, m, stored, "alice,=", "s3cret"); err != nil {
			t.Fatalf("%s: right password refused: %v", m, err)
		}
		wrongPassword := exchange(t, m, stored, "alice,=", "wrong")
		unknownUser := exchange(t, m, stored, "bob", "s3cret")
		if !errors.Is(wrongPassword, ErrAuthentication) || !errors.Is(unknownUser, ErrAuthentication) {
			t.Fatalf("%s: wrong password %v, unknown user %v", m, wrongPassword, unknownUser)
		}
		if wrongPassword.Error() != unknownUser.Error() {
			t.Fatalf("%s: errors tell wrong password (%v) from unknown user (%v)", m, wrongPassword, unknownUser)
		}
		if !credential.Verify("s3cret") || credential.Verify("s3cre") {
			t.Fatalf("%s: Verify", m)
		}
	}
}

func TestUnknownUserGetsStableSalt(t *testing.T) {
	lookup := func(string) (Credential, bool) { return Credential{}, false }
	first := func() string {
		s := NewServer(SHA512, lookup, []byte("secret"))
		s.SetNonce(func() string { return "x" })
		out, err := s.Step([]byte("n,,n=ghost,r=abc"))
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	if a, b := first(), first(); a != b {
		t.Fatalf("unknown user's server-first differs between attempts: %q, %q", a, b)
	}
}

func TestMalformedMessagesRefused(t *testing.T) {
	lookup := func(string) (Credential, bool) { return Credential{}, false }
	for _, message := range []string{"", "x,,n=a,r=b", "n,,r=b", "n,,n=a", "n,,n=a=,r=b", "n,a=other,n=a,r=b", "n,,n=a,r=b,tokenauth=true"} {
		s := NewServer(SHA256, lookup, nil)
		if _, err := s.Step([]byte(message)); !errors.Is(err, ErrAuthentication) {
			t.Errorf("%q: %v", message, err)
		}
	}
}
