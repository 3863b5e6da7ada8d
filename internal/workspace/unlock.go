package workspace

// Locked holds the permissions Unlock added to a tree: by slash-separated
// path ("" for the root), each entry's own before.
type Locked struct {
	perms map[string]uint32
	order []string // as Unlock went: every directory before what it holds
}

// Apply is Apply for changes read from a tree Unlock opened: each copy
// gets the permissions its file had before Unlock.
func (l *Locked) Apply(changes []Change, from, to string, owner Owner) []error {
	return applyChanges(changes, from, to, owner, l.perms)
}

// CopyTree is CopyTree for a tree Unlock opened: each copied file gets the
// permissions it had before Unlock.
func (l *Locked) CopyTree(src, dst string, creator Owner) error {
	return copyTreeWith(src, dst, creator, l.perms)
}
