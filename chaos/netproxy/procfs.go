package netproxy

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// SocketInode returns the inode of the TCP socket whose local address is local and whose remote
// address is remote, from /proc/net/tcp and /proc/net/tcp6 (Linux).
func SocketInode(local, remote *net.TCPAddr) (uint64, error) {
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		inode, found, err := findInode(table, local, remote)
		if err != nil {
			return 0, err
		}
		if found {
			return inode, nil
		}
	}
	return 0, fmt.Errorf("netproxy: no socket %v -> %v in /proc/net/tcp", local, remote)
}

func findInode(table string, local, remote *net.TCPAddr) (uint64, bool, error) {
	f, err := os.Open(table)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, false, nil
		}
		return 0, false, fmt.Errorf("netproxy: %w", err)
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	scanner.Scan() // header
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) < 10 {
			continue
		}
		l, errL := parseProcAddr(fields[1])
		r, errR := parseProcAddr(fields[2])
		if errL != nil || errR != nil || !sameAddr(l, local) || !sameAddr(r, remote) {
			continue
		}
		inode, err := strconv.ParseUint(fields[9], 10, 64)
		if err != nil || inode == 0 {
			continue
		}
		return inode, true, nil
	}
	return 0, false, scanner.Err()
}

func sameAddr(a, b *net.TCPAddr) bool { return a.Port == b.Port && a.IP.Equal(b.IP) }

// parseProcAddr reads "0100007F:1F90": the address as the kernel stores it (32-bit words in host
// order, little-endian here) and the port in hex.
func parseProcAddr(s string) (*net.TCPAddr, error) {
	hexIP, hexPort, ok := strings.Cut(s, ":")
	if !ok {
		return nil, fmt.Errorf("netproxy: address %q", s)
	}
	raw, err := hex.DecodeString(hexIP)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return nil, fmt.Errorf("netproxy: address %q", s)
	}
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(ip[i:], binary.LittleEndian.Uint32(raw[i:]))
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return nil, fmt.Errorf("netproxy: port %q", s)
	}
	return &net.TCPAddr{IP: ip, Port: int(port)}, nil
}

// OwnsSocket reports whether process pid holds a file descriptor for the socket inode.
func OwnsSocket(pid int, inode uint64) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	want := fmt.Sprintf("socket:[%d]", inode)
	for _, e := range entries {
		if target, err := os.Readlink(dir + "/" + e.Name()); err == nil && target == want {
			return true
		}
	}
	return false
}

// ClientIP is the loopback address client id binds its sockets to (127.0.1.id, id in 1..254), so
// that the proxies know it without a lookup.
func ClientIP(id int32) net.IP { return net.IPv4(127, 0, 1, byte(id)) }

// IdentifyByProcess attributes connections: a source in 127.0.1.0/24 is that client; otherwise
// the process owning the dialer's socket is looked up among pids() (node id -> current pid, 0
// for a node that does not run).
func IdentifyByProcess(pids func() map[int32]int) Identify {
	return func(remote, local *net.TCPAddr) Peer {
		if ip4 := remote.IP.To4(); ip4 != nil && ip4[0] == 127 && ip4[1] == 0 && ip4[2] == 1 && ip4[3] != 0 {
			return ClientPeer(int32(ip4[3]))
		}
		inode, err := SocketInode(remote, local)
		if err != nil {
			return Peer{} // the dialer has gone already
		}
		// A process just started may dial before its starter knows its pid: look again briefly.
		for attempt := range 3 {
			for id, pid := range pids() {
				if pid > 0 && OwnsSocket(pid, inode) {
					return NodePeer(id)
				}
			}
			time.Sleep(time.Duration(attempt+1) * 20 * time.Millisecond)
		}
		return Peer{}
	}
}
