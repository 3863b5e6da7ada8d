package workspace

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// ExtractTar unpacks a tar stream into directory rel ("" is the root),
// making rel if it is missing. The stream may be gzip-compressed; that is
// detected from its first bytes. It returns the number of entries
// extracted and the bytes of file content written.
//
// Regular files, directories and symbolic links are accepted. Files and
// links replace what is at their name (see WriteFile); directories are
// merged. Only the permission bits 0777 of modes are kept; directories get
// theirs once everything is extracted, so a read-only directory can still
// be filled (after an error they keep 0755). A link's target must be relative and, resolved lexically from
// the link's own directory, stay inside the workspace.
//
// Refused with ErrUnsafeArchive, naming the entry: absolute names, names
// with a ".." element, device nodes, fifos, hard links (all of them, even
// ones that stay inside: resolving them safely is not worth it), links
// with other targets, entries reached through a symbolic link already in
// the workspace, and more than maxEntries entries (0 means 100000).
//
// quota is as for WriteFile and applies to the total after extraction.
//
// On any error, the entries already extracted stay, and so do directories
// made for the failing one; a file being written is removed. Nothing is
// ever written outside rel.
func (r *Root) ExtractTar(rel string, src io.Reader, quota int64, maxEntries int) (entries int, bytes int64, err error) {
	return r.ExtractTarWith(rel, src, ExtractOptions{Quota: quota, MaxEntries: maxEntries})
}

// ExtractOptions are ExtractTarWith's: Quota and MaxEntries are
// ExtractTar's quota and maxEntries.
type ExtractOptions struct {
	Quota      int64
	MaxEntries int
	// Leave, when not nil, makes the extraction a copy back of a
	// workspace (a container's, read through its engine's archive) rather
	// than an upload: an entry that cannot come back is left out and
	// given to Leave, with why, instead of ending the extraction, so that
	// one entry costs the caller that entry alone. Left out are a regular
	// file whose content does not fit in what the quota leaves, a hard
	// link whose target is not a regular file extracted here, device
	// nodes and fifos; a hard link to a file extracted before is brought
	// back as a copy of that file (its own file, charged to the quota).
	// The quota then bounds the content this extraction writes, as a
	// tmpfs counts it (holes in an archive are zeros, and count): the
	// root's content before it, and the block each entry costs a disk,
	// are not charged (see Snapshot.Cost for that).
	Leave func(name, why string)
}

// ExtractTarWith is ExtractTar with options: see ExtractOptions.
func (r *Root) ExtractTarWith(rel string, src io.Reader, o ExtractOptions) (entries int, bytes int64, err error) {
	quota, maxEntries := o.Quota, o.MaxEntries
	root, err := r.acquire()
	if err != nil {
		return 0, 0, err
	}
	defer r.mu.RUnlock()
	rel, err = clean(rel)
	if err != nil {
		return 0, 0, err
	}
	if maxEntries <= 0 {
		maxEntries = defaultMaxEntries
	}
	x := extractor{rel: rel, remaining: -1, dirModes: map[string]uint32{}, leave: o.Leave, quota: quota}
	used, held, err := usage(root)
	if err != nil {
		return 0, 0, err
	}
	if held+1 > MaxWorkspaceEntries {
		return 0, 0, fmt.Errorf("extract into %q: %w: the workspace holds %d entries already", orDot(rel), ErrTooManyEntries, held)
	}
	if x.leave != nil {
		used = 0 // the content this extraction writes, alone
	}
	if quota > 0 {
		if used > quota {
			return 0, 0, fmt.Errorf("extract into %q: %w", orDot(rel), ErrQuota)
		}
		x.remaining = quota - used
	}
	maxEntries = min(maxEntries, MaxWorkspaceEntries-held)
	// Every entry is resolved beneath this fd, so none can land outside rel.
	if x.dirfd, err = mkdirAll(root, rel); err != nil {
		return 0, 0, err
	}
	defer unix.Close(x.dirfd)

	br := bufio.NewReader(src)
	var in io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return 0, 0, fmt.Errorf("extract: gzip: %w", badArchive(err))
		}
		defer zr.Close()
		in = zr
	}
	tr := tar.NewReader(in)
	made := 0 // directories made along entries' names
	for seen := 1; ; seen++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return entries, bytes, fmt.Errorf("extract: after %d entries: %w", entries, badArchive(err))
		}
		if seen > maxEntries {
			return entries, bytes, fmt.Errorf("tar entry %q: %w: an upload holds at most %d entries, and a workspace %d", hdr.Name, ErrTooManyEntries, min(maxEntries, defaultMaxEntries), MaxWorkspaceEntries)
		}
		x.made = 0
		n, err := x.entry(hdr, archiveReader{tr})
		bytes += n
		extra := x.made // directories made besides the entry itself
		if hdr.Typeflag == tar.TypeDir && extra > 0 {
			extra--
		}
		made += extra
		if seen+made > maxEntries {
			// The directories an entry's name made on its way count as
			// entries too: a name of many components is many.
			return entries, bytes, fmt.Errorf("tar entry %q: %w: an upload makes at most %d entries, its directories among them, and a workspace holds %d", hdr.Name, ErrTooManyEntries, min(maxEntries, defaultMaxEntries), MaxWorkspaceEntries)
		}
		if err != nil {
			return entries, bytes, err
		}
		entries++
		// Every entry costs at least a block, whatever its content, and so
		// does every directory made for it: a tar of empty directories, or
		// of names many directories deep, is charged what it spends.
		if x.remaining >= 0 && x.leave == nil {
			charge := chargeFor(n) - n // the content was counted as it was written
			if hdr.Typeflag != tar.TypeReg {
				charge = InodeCost
			}
			charge += int64(extra) * InodeCost
			x.remaining -= charge
			if x.remaining < 0 {
				return entries, bytes, fmt.Errorf("extract: tar entry %q: %w (each file, directory and link costs at least %d bytes)", hdr.Name, ErrQuota, InodeCost)
			}
		}
	}
	// The tar ends before a gzip stream's trailer: read it too, so that a
	// checksum that fails is seen.
	if _, err := io.Copy(io.Discard, in); err != nil {
		return entries, bytes, fmt.Errorf("extract: after the last entry: %w", badArchive(err))
	}
	return entries, bytes, x.setDirModes()
}

// badArchive marks an error in reading the archive, which is the sender's
// to fix, apart from errors in writing what it holds.
func badArchive(err error) error {
	if err == nil || errors.Is(err, ErrBadArchive) {
		return err
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w: %w", ErrBadArchive, err)
}

// archiveReader reads an entry's content, marking its errors as the
// archive's: a stream that ends before the size its header gave, or whose
// gzip checksum fails.
type archiveReader struct{ r io.Reader }

func (a archiveReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if err != nil && err != io.EOF {
		err = badArchive(err)
	}
	return n, err
}

// extractor holds the state of one ExtractTar call.
type extractor struct {
	rel       string            // where to extract, relative to the root
	dirfd     int               // rel's directory
	remaining int64             // quota left in bytes, or -1 for none
	dirModes  map[string]uint32 // directories to chmod at the end, by path under rel
	made      int               // directories the current entry made
	leave     func(name, why string)
	quota     int64 // as asked, for what Leave is told
}

// left gives name to x.leave with why, for an entry that is not brought
// back.
func (x *extractor) left(name, why string, args ...any) {
	x.leave(name, fmt.Sprintf(why, args...))
}

// tooLong says why a file of size bytes is left out of a copy back.
func (x *extractor) tooLong(size int64) string {
	return fmt.Sprintf("it is %d bytes long, past the %d bytes left of the %d-byte quota (holes, as truncate makes, count as the zeros an archive carries)", size, max(x.remaining, 0), x.quota)
}

// refuse reports hdr as refused, with why.
func refuse(hdr *tar.Header, why string, args ...any) error {
	return fmt.Errorf("tar entry %q: %w: %s", hdr.Name, ErrUnsafeArchive, fmt.Sprintf(why, args...))
}

// entry extracts one entry and returns the bytes of content written.
func (x *extractor) entry(hdr *tar.Header, content io.Reader) (int64, error) {
	name, err := clean(hdr.Name)
	if err == nil {
		err = checkDepth(joinPath(x.rel, name))
	}
	if err != nil {
		return 0, refuse(hdr, "%v", err)
	}
	if name == "" {
		if hdr.Typeflag == tar.TypeDir {
			return 0, nil // "./": rel itself, which exists
		}
		return 0, refuse(hdr, "names the target directory")
	}
	perm := uint32(hdr.Mode) & 0o777
	switch hdr.Typeflag {
	case tar.TypeDir:
		fd, made, err := mkdirAllMade(x.dirfd, name)
		x.made += made
		if err != nil {
			return 0, x.fail(hdr, err)
		}
		unix.Close(fd)
		// The owner may always list and enter a directory: one it could
		// not would stop a codecell that runs as that owner (not root)
		// from copying, listing or measuring what it holds. (A directory
		// without its owner's write permission, read-only, is removed all
		// the same: Remove opens it up.)
		x.dirModes[name] = perm | 0o500
		return 0, nil

	case tar.TypeReg:
		if x.leave != nil && x.remaining >= 0 && hdr.Size > x.remaining {
			// Left before a byte of it is written: the reader skips its
			// content.
			x.left(name, "%s", x.tooLong(hdr.Size))
			return 0, nil
		}
		dirfd, base, err := x.parent(hdr, name)
		if err != nil {
			return 0, err
		}
		defer unix.Close(dirfd)
		limit := int64(-1)
		if x.remaining >= 0 {
			limit = x.remaining + replacedSize(dirfd, base)
		}
		n, err := writeAt(dirfd, base, name, content, perm, limit)
		if err != nil {
			return 0, x.fail(hdr, err)
		}
		if limit >= 0 {
			x.remaining = limit - n
		}
		return n, nil

	case tar.TypeSymlink:
		target := hdr.Linkname
		switch {
		case target == "" || strings.IndexByte(target, 0) >= 0:
			return 0, refuse(hdr, "bad link target %q", target)
		case path.IsAbs(target):
			return 0, refuse(hdr, "absolute link target %q", target)
		}
		// Resolve the target lexically from the link's directory, counted
		// from the workspace root.
		if t := path.Join(x.rel, path.Dir(name), target); t == ".." || strings.HasPrefix(t, "../") {
			return 0, refuse(hdr, "link target %q leads outside the workspace", target)
		}
		dirfd, base, err := x.parent(hdr, name)
		if err != nil {
			return 0, err
		}
		defer unix.Close(dirfd)
		err = replaceAt(dirfd, base, name, func(tmp string) error {
			return unix.Symlinkat(target, dirfd, tmp)
		})
		return 0, x.fail(hdr, err)

	case tar.TypeXGlobalHeader:
		return 0, nil // PAX defaults for later entries; nothing to extract
	case tar.TypeLink:
		if x.leave != nil {
			return x.copyLink(hdr, name)
		}
		return 0, refuse(hdr, "hard links are not supported")
	case tar.TypeChar, tar.TypeBlock:
		if x.leave != nil {
			x.left(name, "a device node, which is not a workspace file")
			return 0, nil
		}
		return 0, refuse(hdr, "device node")
	case tar.TypeFifo:
		if x.leave != nil {
			x.left(name, "a fifo, which is not a workspace file")
			return 0, nil
		}
		return 0, refuse(hdr, "fifo")
	default:
		if x.leave != nil {
			x.left(name, "an archive entry of type %q, which is not a workspace file", hdr.Typeflag)
			return 0, nil
		}
		return 0, refuse(hdr, "unsupported entry type %q", hdr.Typeflag)
	}
}

// copyLink brings back the hard link hdr, at name, as a copy of the
// regular file it names, which an entry before it extracted (hdr.Linkname
// is relative to rel, as entries' names are). The file is reached beneath
// rel without following a link, as every entry is.
func (x *extractor) copyLink(hdr *tar.Header, name string) (int64, error) {
	target, err := CleanPath(hdr.Linkname)
	if err != nil {
		x.left(name, "a hard link to %q, which is not a name in the workspace", hdr.Linkname)
		return 0, nil
	}
	in, st, err := openRead(x.dirfd, target)
	if err != nil {
		x.left(name, "a hard link to %s, which was not brought back (%v)", target, err)
		return 0, nil
	}
	defer in.Close()
	if x.remaining >= 0 && st.Size > x.remaining {
		x.left(name, "a hard link to %s, whose copy: %s", target, x.tooLong(st.Size))
		return 0, nil
	}
	dirfd, base, err := x.parent(hdr, name)
	if err != nil {
		return 0, err
	}
	defer unix.Close(dirfd)
	n, err := writeAt(dirfd, base, name, io.LimitReader(in, st.Size), uint32(st.Mode&0o777), x.remaining)
	if err != nil {
		return 0, x.fail(hdr, err)
	}
	if x.remaining >= 0 {
		x.remaining -= n
	}
	return n, nil
}

// parent opens (making it if missing) the directory of name, under rel.
func (x *extractor) parent(hdr *tar.Header, name string) (int, string, error) {
	dir, base := splitPath(name)
	fd, made, err := mkdirAllMade(x.dirfd, dir)
	x.made += made
	if err != nil {
		return -1, "", x.fail(hdr, err)
	}
	return fd, base, nil
}

// fail adds hdr to err; a symbolic link in the way makes the entry unsafe.
func (x *extractor) fail(hdr *tar.Header, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrSymlink):
		return fmt.Errorf("tar entry %q: %w: %w", hdr.Name, ErrUnsafeArchive, err)
	default:
		return fmt.Errorf("tar entry %q: %w", hdr.Name, err)
	}
}

// setDirModes gives the extracted directories their modes, deepest first,
// so that a directory made unsearchable cannot hide one below it.
func (x *extractor) setDirModes() error {
	names := make([]string, 0, len(x.dirModes))
	for name := range x.dirModes {
		names = append(names, name)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	for _, name := range names {
		// fchmod needs a real fd, not an O_PATH one.
		fd, err := openBeneath(x.dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return mapErr("chmod", name, err)
		}
		err = unix.Fchmod(fd, x.dirModes[name])
		unix.Close(fd)
		if err != nil {
			return mapErr("chmod", name, err)
		}
	}
	return nil
}

// WriteTar writes rel as a tar stream to w: the contents of a directory
// ("" is the root), with names relative to it, or a regular file as one
// entry named by its base name. Symbolic links are stored as links, never
// followed; fifos, devices and sockets are skipped; hard-linked files are
// stored as separate files. Only permission bits 0777 and modification
// times are kept; owners are not recorded. A file that shrinks while it is
// archived is an error. A tree whose files' holes come to more than
// HoleBudget is ErrTooSparse, before anything is written.
func (r *Root) WriteTar(rel string, w io.Writer) error {
	root, err := r.acquire()
	if err != nil {
		return err
	}
	defer r.mu.RUnlock()
	rel, err = clean(rel)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	add := func(dirfd int, name, p string, st *unix.Stat_t) error {
		return addToTar(tw, dirfd, name, p, st)
	}
	if rel == "" {
		if err := checkHoles(root, ".", rel); err != nil {
			return err
		}
		fd, err := openBeneath(root, ".", unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return mapErr("open", ".", err)
		}
		err = walkTree(fd, "", 0, add)
		if err != nil {
			return err
		}
		return tw.Close()
	}
	dirfd, base, st, err := lookup(root, rel, "archive")
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if err := checkHoles(dirfd, base, rel); err != nil {
			return err
		}
		fd, err := openBeneath(dirfd, base, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return mapErr("open", rel, err)
		}
		err = walkTree(fd, "", 0, add)
	case unix.S_IFREG:
		if h := holes(&st); h > holeBudget {
			return tooSparse(rel, &st)
		}
		if err := readable(dirfd, base, rel, &st); err != nil {
			return err
		}
		err = add(dirfd, base, base, &st)
	case unix.S_IFLNK:
		err = fmt.Errorf("archive %q: %w", rel, ErrSymlink)
	default:
		err = fmt.Errorf("archive %q: %w", rel, ErrNotRegular)
	}
	if err != nil {
		return err
	}
	return tw.Close()
}

// ErrTooSparse reports a tree WriteTar does not archive: its files' holes
// (their lengths past the blocks they hold) come to more than HoleBudget.
// A tar holds every byte of a file, holes as zeros, so a file a truncate(2)
// made a terabyte long would make a terabyte of archive.
var ErrTooSparse = errors.New("too sparse to archive")

func tooSparse(p string, st *unix.Stat_t) error {
	return fmt.Errorf("archive %q: %w: it is %d bytes long and holds %d, and an archive writes at most %d bytes of holes (zeros no block holds); shrink or remove it, or fetch it alone",
		p, ErrTooSparse, st.Size, st.Blocks*512, holeBudget)
}

// checkHoles walks the directory name in dirfd (rel is its path) before a
// byte of its archive is written, and fails with ErrTooSparse on the file
// that takes the holes of its files past the budget.
func checkHoles(dirfd int, name, rel string) error {
	fd, err := openBeneath(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return mapErr("open", orDot(rel), err)
	}
	var total int64
	return walkTree(fd, "", 0, func(dirfd int, name, p string, st *unix.Stat_t) error {
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil
		}
		if total += holes(st); total > holeBudget {
			return tooSparse(joinPath(rel, p), st)
		}
		return readable(dirfd, name, joinPath(rel, p), st)
	})
}

// readable refuses a file this process may not read (not root, it owns a
// file whose permissions deny its owner reading it): an archive is
// refused before its first byte rather than cut short at that file.
func readable(dirfd int, name, p string, st *unix.Stat_t) error {
	if err := unix.Faccessat(dirfd, name, unix.R_OK, unix.AT_EACCESS|unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.EACCES) {
		return fmt.Errorf("archive %q: %w: its permissions (%v) deny reading it to codecell, which runs as its owner", p, fs.ErrPermission, fileMode(st).Perm())
	}
	return nil
}

// addToTar writes name in dirfd to tw as p.
func addToTar(tw *tar.Writer, dirfd int, name, p string, st *unix.Stat_t) error {
	hdr := &tar.Header{
		Name:    p,
		Mode:    int64(st.Mode & 0o777),
		ModTime: modTime(st),
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
		return tw.WriteHeader(hdr)
	case unix.S_IFLNK:
		target, err := readlinkAt(dirfd, name)
		if err != nil {
			return ignoreVanished(mapErr("readlink", p, err))
		}
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = target
		return tw.WriteHeader(hdr)
	case unix.S_IFREG:
		f, now, err := openRead(dirfd, name)
		if errors.Is(err, ErrNotRegular) || errors.Is(err, ErrSymlink) {
			return nil // replaced by something else meanwhile
		}
		if err != nil {
			return ignoreVanished(err)
		}
		defer f.Close()
		hdr.Typeflag = tar.TypeReg
		hdr.Size = now.Size
		hdr.Mode = int64(now.Mode & 0o777)
		hdr.ModTime = modTime(&now)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		// The header promised Size bytes: copy no more, and fail on fewer.
		n, err := io.Copy(tw, io.LimitReader(f, now.Size))
		if err != nil {
			return fmt.Errorf("archive %q: %w", p, err)
		}
		if n < now.Size {
			return fmt.Errorf("archive %q: file shrank while being read", p)
		}
		return nil
	default:
		return nil // fifos, sockets and devices are not archived
	}
}
