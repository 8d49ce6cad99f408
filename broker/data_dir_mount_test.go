package broker

import (
	"os"
	"strings"
	"testing"
)

const sampleMountinfo = `22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:2 - proc proc rw
30 22 254:16 / /var/lib/sluice rw,noatime shared:9 - ext4 /dev/vdb rw,lazytime
31 22 254:32 / /srv/old\040logs rw,relatime shared:10 - ext4 /dev/vdc rw
32 22 0:40 / /tmp rw,nosuid,nodev shared:11 - tmpfs tmpfs rw,size=1024k
33 22 254:48 / /srv rw,relatime shared:12 - xfs /dev/vdd rw
`

func TestFindMountTakesTheLongestContainingPoint(t *testing.T) {
	for _, c := range []struct{ path, point, fsType string }{
		{"/var/lib/sluice/data", "/var/lib/sluice", "ext4"},
		{"/var/lib/sluicer", "/", "ext4"}, // a name prefix is not a parent
		{"/srv/old logs/node1", "/srv/old logs", "ext4"},
		{"/srv/other", "/srv", "xfs"},
		{"/tmp", "/tmp", "tmpfs"},
	} {
		m, ok, err := findMount(strings.NewReader(sampleMountinfo), c.path)
		if err != nil || !ok {
			t.Fatalf("%s: found %v, err %v", c.path, ok, err)
		}
		if m.point != c.point || m.fsType != c.fsType {
			t.Errorf("%s: mount %s (%s), want %s (%s)", c.path, m.point, m.fsType, c.point, c.fsType)
		}
	}
}

// Only ext4 without lazytime draws the advice; lazytime may come in either option field.
func TestMountAdviceOnlyForExt4WithoutLazytime(t *testing.T) {
	for _, c := range []struct {
		path   string
		advice bool
	}{
		{"/data", true},                 // ext4 on /, relatime
		{"/srv/old logs/node1", true},   // ext4, no lazytime
		{"/var/lib/sluice/data", false}, // lazytime among the file system's options
		{"/srv/node1", false},           // xfs: not measured, not advised
		{"/tmp/sluice", false},          // tmpfs
	} {
		advice, err := mountAdvice(strings.NewReader(sampleMountinfo), c.path)
		if err != nil {
			t.Fatal(err)
		}
		if (advice != "") != c.advice {
			t.Errorf("%s: advice %q, want some: %v", c.path, advice, c.advice)
		}
	}
	advice, _ := mountAdvice(strings.NewReader("40 22 254:0 / /d rw,lazytime shared:1 - ext4 /dev/vde rw\n"), "/d/x")
	if advice != "" {
		t.Errorf("lazytime among the mount's own options still advised: %q", advice)
	}
}

func TestFindMountRejectsAMalformedLine(t *testing.T) {
	if _, _, err := findMount(strings.NewReader("22 1 254:0 / / rw ext4\n"), "/x"); err == nil {
		t.Fatal("a line without the separator was accepted")
	}
}

// The machine's own listing parses, and names a mount for a temporary directory.
func TestFindMountReadsThisMachine(t *testing.T) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Skip("no /proc/self/mountinfo:", err)
	}
	defer f.Close()
	if _, ok, err := findMount(f, t.TempDir()); err != nil || !ok {
		t.Fatalf("found %v, err %v", ok, err)
	}
}
