package broker

// The data directory's mount: on ext4 every append that changes a file's modification time (the
// timestamp moves every few milliseconds) takes a journal handle to log it, and a handle waits
// while another fsync on the same file system forces a journal commit. On a 3-node cluster at
// 375,000 msg/s the Raft log's fsync of each consumer offset commit (every 5 s) made that commit
// wait on the disk, and with it appends on the event loop and in the followers: about half of the
// 60 s runs had a 100-800 ms stall. Mounted with lazytime, the kernel keeps timestamp changes in
// memory (written with the inode's next other change, an fsync, or within a day), and four runs
// in four had none. So the broker says so at start when the data directory sits on ext4 without it.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// mountOf is one line of /proc/self/mountinfo, reduced to what warnMountOptions needs.
type mountOf struct {
	point   string
	fsType  string
	options []string // the mount's own and its file system's, together
}

// findMount returns the mount that holds path (absolute, symbolic links resolved) in a
// mountinfo listing: the longest mount point containing it, the last of equal ones (mounted over
// the others).
func findMount(mountinfo io.Reader, path string) (mountOf, bool, error) {
	var best mountOf
	found := false
	scanner := bufio.NewScanner(mountinfo)
	scanner.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for scanner.Scan() {
		// "36 35 98:0 /root /mnt rw,noatime shared:1 - ext4 /dev/vda rw,lazytime"
		fields := strings.Fields(scanner.Text())
		dash := slices.Index(fields, "-")
		if len(fields) < 6 || dash < 6 || dash+3 > len(fields) {
			return mountOf{}, false, fmt.Errorf("broker: mountinfo line %q: unexpected format", scanner.Text())
		}
		point := unescapeMountField(fields[4])
		if !pathWithin(path, point) || (found && len(point) < len(best.point)) {
			continue
		}
		options := strings.Split(fields[5], ",")
		if len(fields) > dash+3 {
			options = append(options, strings.Split(fields[dash+3], ",")...)
		}
		best, found = mountOf{point: point, fsType: fields[dash+1], options: options}, true
	}
	if err := scanner.Err(); err != nil {
		return mountOf{}, false, fmt.Errorf("broker: read mountinfo: %w", err)
	}
	return best, found, nil
}

// pathWithin reports whether path is point or lies below it.
func pathWithin(path, point string) bool {
	if point == "/" || path == point {
		return true
	}
	return strings.HasPrefix(path, point+"/")
}

// unescapeMountField undoes mountinfo's octal escapes (\040 for a space, \011, \012, \134).
func unescapeMountField(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountAdvice is what the broker has to say about the mount holding dataDir, or "" for nothing.
func mountAdvice(mountinfo io.Reader, dataDir string) (string, error) {
	path, err := filepath.Abs(dataDir)
	if err != nil {
		return "", fmt.Errorf("broker: data dir %s: %w", dataDir, err)
	}
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		path = resolved
	}
	m, ok, err := findMount(mountinfo, path)
	if err != nil || !ok || m.fsType != "ext4" {
		return "", err
	}
	for _, o := range m.options {
		if o == "lazytime" {
			return "", nil
		}
	}
	return fmt.Sprintf("the data directory is on ext4 (%s) mounted without lazytime: appends log each modification time change in the journal and can wait 100 ms or more behind another process's fsync; remount with lazytime (mount -o remount,lazytime %s, and add it to /etc/fstab)", m.point, m.point), nil
}

// warnMountOptions logs mountAdvice for the broker's data directory. Failing to tell is not an error.
func (b *Broker) warnMountOptions() {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return // not Linux, or no /proc
	}
	defer f.Close()
	advice, err := mountAdvice(f, b.config.DataDir)
	switch {
	case err != nil:
		b.logger.Debug("could not check the data directory's mount options", "err", err)
	case advice != "":
		b.logger.Warn(advice, "data_dir", b.config.DataDir)
	}
}
