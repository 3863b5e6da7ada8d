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
// the workspace's own names, refusing any other, and ExtractTar then
// checks every entry as it does an upload's (no absolute names or "..", no
// links that leave the workspace, no hard links, devices or fifos, a quota
// of bytes and entries).

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

// Reroot copies the archive src, whose entries are the directory base and
// what is under it ("workspace", "workspace/a.txt"), to dst with names
// relative to that directory ("a.txt"); the directory's own entry is left
// out. Podman names a volume's entries from its root instead ("/",
// "/a.txt", or "./", "./a.txt"): the first entry says which naming the
// archive uses. An entry
// under another name is refused: the engine was asked for one directory. Nothing else about an entry is checked here: the reader
// of dst checks what it unpacks (workspace.Root.ExtractTar). At most limit
// bytes of content are copied (0: no bound), so that a bomb costs no more
// than the quota that will refuse it.
//
// Symbolic links go to link, when it is not nil, instead of dst: a link
// the program made may point anywhere (it is recorded as a link, never
// followed), which ExtractTar refuses. Entries that are not files,
// directories or symbolic links (fifos, devices, sockets), and hard links,
// whose content is another entry's, go to skip, when it is not nil,
// instead of refusing the whole archive: the program's other files still
// come back, and the caller says what did not.
func Reroot(dst io.Writer, src io.Reader, base string, limit int64, link func(name, target string) error, skip func(name, why string)) error {
	tr := tar.NewReader(src)
	tw := tar.NewWriter(dst)
	var copied int64
	first := true
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return tw.Close()
		}
		if err != nil {
			return fmt.Errorf("reading the container's archive: %w", err)
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		if first && (name == "/" || name == "." || name == "") {
			base = ""
		}
		first = false
		rest := name
		if base != "" {
			var ok bool
			rest, ok = strings.CutPrefix(name, base)
			if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
				return fmt.Errorf("%w: %q", errForeignEntry, hdr.Name)
			}
		}
		rest = strings.Trim(rest, "/")
		if rest == "" {
			continue
		}
		hdr.Name = rest
		if hdr.Typeflag == tar.TypeDir {
			hdr.Name += "/"
		}
		if hdr.Typeflag == tar.TypeSymlink && link != nil {
			if err := link(rest, hdr.Linkname); err != nil {
				return fmt.Errorf("link %q: %w", rest, err)
			}
			continue
		}
		if skip != nil {
			switch hdr.Typeflag {
			case tar.TypeReg, tar.TypeDir, tar.TypeSymlink:
			case tar.TypeLink:
				skip(rest, "a hard link, which is not brought back")
				continue
			default:
				skip(rest, "not a file, directory or link")
				continue
			}
		}
		if hdr.Typeflag == tar.TypeLink {
			// Refused by the reader in any case; named as it would be.
			hdr.Linkname = strings.TrimPrefix(strings.TrimPrefix(path.Clean(hdr.Linkname), base), "/")
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.Format = tar.FormatPAX
		hdr.PAXRecords = nil
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
		n := hdr.Size
		if limit > 0 && copied+n > limit {
			return fmt.Errorf("entry %q: %w", hdr.Name, workspace.ErrQuota)
		}
		if _, err := io.CopyN(tw, tr, n); err != nil && n > 0 {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
		copied += n
	}
}
