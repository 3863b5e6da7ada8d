package docker

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/codecell-dev/codecell/internal/workspace"
)

// The workspace travels as tar archives through the engine's archive
// endpoints. Going in, codecell writes the archive from the caller's
// directory (workspace.Root.WriteTar); coming back, the archive is the
// engine's, made from a directory the program controlled, and is read as
// untrusted: Reroot renames its entries from the engine's "workspace/…" to
// the workspace's own names, refusing any other, and ExtractTarWith then
// checks every entry as it does an upload's (no absolute names or "..",
// nothing reached through a link, a quota of bytes and entries). What
// cannot come back is left, with a word, rather than failing the rest: a
// hard link comes back as a copy of its file while the quota lasts, and
// the launcher leaves out beforehand the files too long for the quota (a
// file of holes, which an archive carries as zeros) and the fifos,
// sockets and devices (see leave).

// errForeignEntry is an archive entry outside the directory asked for.
var errForeignEntry = errors.New("an entry outside the workspace")

// ownTar copies the archive src to dst as files of uid:gid, each name
// under prefix: the workspace as the engine unpacks it into the container,
// owned by the program's user. The directory itself comes first, as
// "./", writable by all: an engine that does not give it to the user (as
// Podman does not, for a container not yet started) still lets the
// program write there, and the program is the container's only user.
//
// With links not nil, a symbolic link whose target climbs out of the
// directory (up -> .., x -> ../y) is left out and added to *links instead:
// Docker refuses to unpack one ("invalid symlink"), and the container's
// launcher makes it before the program starts (see launch).
func ownTar(dst io.Writer, src io.Reader, uid, gid int, rootMode int64, links *[]linkSpec) error {
	tr := tar.NewReader(src)
	tw := tar.NewWriter(dst)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: rootMode, Uid: uid, Gid: gid, Format: tar.FormatPAX}); err != nil {
		return err
	}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return tw.Close()
		}
		if err != nil {
			return err
		}
		if links != nil && hdr.Typeflag == tar.TypeSymlink && climbsOut(hdr.Name, hdr.Linkname) {
			*links = append(*links, linkSpec{Name: path.Clean(hdr.Name), Target: hdr.Linkname})
			continue
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = uid, gid, "", ""
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
}

// linkSpec is a symbolic link the launcher makes in the workspace: Name,
// relative to it, pointing at Target.
type linkSpec struct {
	Name   string `json:"name"`
	Target string `json:"target"`
}

// climbsOut reports whether a link named name (relative to a directory)
// with the relative target reaches above that directory.
func climbsOut(name, target string) bool {
	if target == "" || path.IsAbs(target) {
		return false
	}
	to := path.Join(path.Dir(path.Clean(name)), target)
	return to == ".." || strings.HasPrefix(to, "../")
}

// Reroot copies the archive src, whose entries are the directory o.Base
// and what is under it ("workspace", "workspace/a.txt"), to dst with names
// relative to that directory ("a.txt"); the directory's own entry is left
// out. Podman names a volume's entries from its root instead ("/",
// "/a.txt", or "./", "./a.txt"): the first entry says which naming the
// archive uses. An entry under another name is refused: the engine was
// asked for one directory. A hard link's target is renamed as its name is
// (one whose target is outside the directory gets "/", a name the reader
// finds nothing at). Nothing else about an entry is checked here: the
// reader of dst checks what it unpacks (workspace.Root.ExtractTarWith,
// which brings a hard link back as a copy of its target and leaves out,
// with a word, what cannot come back).
func Reroot(dst io.Writer, src io.Reader, o RerootOptions) error {
	tr := tar.NewReader(src)
	tw := tar.NewWriter(dst)
	base := o.Base
	var copied, passed int64
	first := true
	// under is name's path under base, or false when it is not under it.
	under := func(name string) (string, bool) {
		name = strings.TrimPrefix(name, "./")
		if base == "" {
			return strings.Trim(name, "/"), true
		}
		rest, ok := strings.CutPrefix(name, base)
		if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
			return "", false
		}
		return strings.Trim(rest, "/"), true
	}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return tw.Close()
		}
		if err != nil {
			return fmt.Errorf("reading the container's archive: %w", err)
		}
		if name := strings.TrimPrefix(hdr.Name, "./"); first && (name == "/" || name == "." || name == "") {
			base = ""
		}
		first = false
		rest, ok := under(hdr.Name)
		if !ok {
			return fmt.Errorf("%w: %q", errForeignEntry, hdr.Name)
		}
		if rest == "" {
			continue
		}
		hdr.Name = rest
		switch hdr.Typeflag {
		case tar.TypeDir:
			hdr.Name += "/"
		case tar.TypeSymlink:
			if o.Link != nil {
				if err := o.Link(rest, hdr.Linkname); err != nil {
					return fmt.Errorf("link %q: %w", rest, err)
				}
				continue
			}
		case tar.TypeLink:
			target, ok := under(path.Clean(hdr.Linkname))
			if !ok || target == "" {
				target = "/" // nothing in the workspace: the reader leaves it
			}
			hdr.Linkname = target
		case tar.TypeReg, tar.TypeXGlobalHeader:
		default:
			if o.Special != nil {
				o.Special(rest)
				continue
			}
		}
		n := hdr.Size
		if hdr.Typeflag != tar.TypeReg {
			n = 0 // a header's alone, whatever it says
		}
		if o.Limit > 0 && copied+n > o.Limit && o.Leave != nil {
			// Left out before its content, which the next header skips:
			// reading past it costs time, not room, and is bounded too.
			if passed += n; passed > o.Limit {
				return fmt.Errorf("entry %q, %d bytes long: %w", rest, n, errArchiveTooLong)
			}
			o.Leave(rest, n, o.Limit-copied)
			continue
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.Format = tar.FormatPAX
		hdr.PAXRecords = nil
		hdr.Size = n
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
		if o.Limit > 0 && copied+n > o.Limit {
			return fmt.Errorf("entry %q: %w", hdr.Name, workspace.ErrQuota)
		}
		if _, err := io.CopyN(tw, tr, n); err != nil && n > 0 {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
		copied += n
	}
}

// RerootOptions are Reroot's.
type RerootOptions struct {
	// Base is the directory the engine was asked for, as its archive
	// names it ("workspace").
	Base string
	// Limit bounds the content copied to dst (0: no bound). A file that
	// would take it past goes to Leave, when it is not nil, with its
	// length and the room left, and is read past, not copied, as long as
	// what is read past stays within Limit too: an archive that holds
	// more ends the copy with errArchiveTooLong, so that a file of holes
	// a terabyte long (an archive carries holes as zeros) costs no more
	// than the quota. Without Leave, such a file ends the copy with
	// workspace.ErrQuota.
	Limit int64
	Leave func(name string, size, room int64)
	// Link, when not nil, is given the symbolic links instead of dst: a
	// link the program made may point anywhere (it is recorded as a
	// link, never followed), which ExtractTar refuses.
	Link func(name, target string) error
	// Special, when not nil, is given the entries that are not files,
	// directories or links (fifos, devices, and types tar has no name
	// for) instead of dst.
	Special func(name string)
}

// errArchiveTooLong is an archive that holds more than Reroot reads: see
// RerootOptions.Limit.
var errArchiveTooLong = errors.New("the archive holds more than the quota lets the read-back read past")
