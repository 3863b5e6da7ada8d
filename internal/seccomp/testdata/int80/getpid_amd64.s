//go:build linux && amd64

#include "textflag.h"

// func getpid32() int32
TEXT ·getpid32(SB), NOSPLIT, $0-4
	MOVL $20, AX // __NR_getpid in arch/x86/entry/syscalls/syscall_32.tbl
	INT  $0x80
	MOVL AX, ret+0(FP)
	RET
