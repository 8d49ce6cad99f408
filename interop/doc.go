// Package interop holds tests that run sluice's own client (package client) against an in-process
// broker. They live apart from both packages so that each of those builds and tests on its own while
// the other is being changed. There is no non-test code here.
package interop
