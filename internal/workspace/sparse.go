package workspace

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// A program can make a file of any length that holds almost nothing: a
// truncate(2) to a petabyte allocates no block, and a tmpfs workspace
// quota counts blocks. Copied byte by byte, such a file would fill the
// host's disk; hashed byte by byte, it would hold the host for days. So
// copies keep holes as holes (copySparse), and hashing reads holes only up
// to a budget (HoleBudget).

// HoleBudget is how many bytes of holes (a file's length beyond the blocks
// it holds) one listing of changes hashes in all: a file with more holes
// than what is left of it is listed without a digest, with a warning.
// Reading a hole costs no disk but the hash still takes every zero.
const HoleBudget = 1 << 30

// holeBudget is HoleBudget, lowered by tests.
var holeBudget int64 = HoleBudget

// errTooSparse is a file hashFile would not read: its holes are past the
// budget left.
var errTooSparse = errors.New("mostly holes")

// sparseFile is a regular file, open for reading, and its stat when
// opened: a source writeAt copies with copySparse.
type sparseFile struct {
	f  *os.File
	st *unix.Stat_t
}

func (s sparseFile) Read(p []byte) (int, error) { return s.f.Read(p) }

// holes is how many bytes of the file of stat st are holes, at least.
func holes(st *unix.Stat_t) int64 {
	return max(0, st.Size-st.Blocks*512)
}

// copySparse copies the regular file in to out, the length in had when
// opened (st) and no more, writing only the parts of in that hold data and
// leaving holes for the rest: a file sparse in the sandbox is sparse where
// it is copied, and costs the destination no more blocks than its source.
// Where the source's filesystem cannot say where its data is, it copies
// every byte.
func copySparse(out, in *os.File, st *unix.Stat_t) (int64, error) {
	size := st.Size
	if holes(st) == 0 {
		return io.Copy(out, io.LimitReader(in, size))
	}
	fd := int(in.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err == unix.ENXIO || err == nil && data >= size {
			break // holes to the end
		}
		if err != nil {
			if off == 0 && (err == unix.EINVAL || err == unix.EOPNOTSUPP) {
				if _, err := in.Seek(0, io.SeekStart); err != nil {
					return 0, err
				}
				return io.Copy(out, io.LimitReader(in, size))
			}
			return 0, err
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return 0, err
		}
		hole = min(hole, size)
		if _, err := in.Seek(data, io.SeekStart); err != nil {
			return 0, err
		}
		if _, err := out.Seek(data, io.SeekStart); err != nil {
			return 0, err
		}
		if _, err := io.CopyN(out, in, hole-data); err != nil {
			if err == io.EOF {
				err = errors.New("the file shrank while it was copied")
			}
			return 0, err
		}
		off = hole
	}
	// The length, with the holes at its end.
	if err := out.Truncate(size); err != nil {
		return 0, err
	}
	return size, nil
}
