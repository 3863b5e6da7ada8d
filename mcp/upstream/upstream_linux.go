package upstream

import "syscall"

// dieWithParent has the kernel kill a stdio server when codecell dies,
// even by SIGKILL, which gives codecell no chance to stop it; what the
// server started sees its stdin close. (Pdeathsig fires when the thread
// that started the server exits; Go ends threads only for goroutines that
// exit locked to theirs, and an upstream server ended early is started
// again on its next use.)
func dieWithParent(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
