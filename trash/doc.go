// Package trash removes deleted data directories in the background, gently.
//
// Removing a directory of several GB at once stalls the whole filesystem: ext4 frees every extent
// of an unlinked file in one journal transaction (and, mounted with discard, sends the discards
// with it), and every fsync on the filesystem waits for that commit. On this project's test machine
// unlinking a 3 GiB file blocked its caller for 870 ms and stalled other writers' fdatasyncs by
// up to 113 ms; a broker that deleted a topic that way missed its Raft heartbeats. A Bin instead
// shrinks each file in steps (Config.Step bytes, Config.Pause apart) before unlinking it, one file
// at a time: the same 3 GiB in 1 MiB steps stalled other fdatasyncs by at most 24 ms.
//
// Shrink does the same to one open file; segment retention uses it on a retired segment's data
// file before the last close of that unlinked file would free its blocks at once.
//
// Invariants:
//   - Discard returns only once the directory has left its name: it is renamed to
//     <dir>.deleted-<UTC time> and the parent directory fsynced, so whatever is created under the old
//     name afterwards starts empty, and a crash leaves only names that Sweep finds again.
//   - Nothing outside a directory named <something>.deleted-<time> is ever removed.
//   - One goroutine removes, one directory after another; Close stops it between two steps and waits
//     for it. What is left is removed after the next start's Sweep.
package trash
