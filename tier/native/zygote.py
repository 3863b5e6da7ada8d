"""The native tier's fork server for Python: a template interpreter that
forks one child per run.

Started by a sandbox's init in its place, as

    python3 [flags] zygote.py CONTROL_FD [RUNNER [MODULE...]]

in a sandbox that is built but not confined: pid 1 of its pid namespace,
root of its user namespace with the capabilities that gives over it. It
loads RUNNER, the language's runner (its source, or its code object
marshalled), as the module __codecell_template__, which imports what runs
need and runs no program, then imports each MODULE (of the interpreter's
own library: the jobs this template serves would import them). Without
RUNNER it serves runs that execute their own program (any language): only
the sandbox is forked, not the interpreter. Then it serves the host on
CONTROL_FD, one JSON message per packet (the host's side is
zygote_linux.go):

    host -> zygote  {"config": ...}            once: how runs are confined
    zygote -> host  {"ready": {}}
    host -> zygote  {"fork": {"enter": n}} + [socket, tasks files...]
                                               once per run; on cgroup v1, n tasks
                                               files of the run's cgroup, then the
                                               server's own

For each fork, the server clones a child, P1, straight into new mount,
UTS, IPC, network and pid namespaces (pid 1 of the new pid namespace),
and into the run's cgroup when it could stand there itself for the clone
(move_thread), and P1 speaks on the run's socket:

    P1 -> host      {"hello": true, "placed": p} + [pidfd]
                                               unless placed, the host puts P1 in
                                               the run's cgroup (ahead of the run:
                                               see zygote_linux.go)
    host -> P1      {"go": {"mounts": ...}}    the run's filesystems
    P1              enters a cgroup namespace of its own, rooted at the
                    run's cgroup
    P1              mounts the run's own tmpfs workspace, /tmp, runner
                    directory and /dev/shm, and its own /proc
    P1 -> host      {"ready": {}} + [pidfd]    the host fills the workspace
                                               through /proc/P1/root
    host -> P1      {"job": ...} + [stdin, stdout, stderr, extra...]
    P1              has confined itself as a sandbox's init does (all but
                    four capabilities dropped, no_new_privs, Landlock,
                    seccomp) before it said ready; it forks G, which drops
                    the rest, becomes the program's user and runs the job:
                    the runner's, or, for a run without one, the job's
                    command, executed
    P1 -> host      {"started": pid}
    host -> P1      {"kill": true}             (on timeout or cancellation)
    P1 -> host      {"exited": {...}}          G ended; P1 has killed the rest
    host -> P1      {"exit": true}             the host has read the workspace

P1 speaks the protocol a sandbox's init speaks for a job (internal/sandboxinit/protocol_linux.go):
the host runs a forked run as it runs any other.

What the template holds is the same in every child: the interpreter, the
runner and the modules it imported, none of which has seen a program. Each
run is its own fork, in namespaces and a cgroup of its own, and nothing it
does reaches the template or another run.

Python's hash seed is the template's, the same in every run forked from it;
the random module is seeded afresh in each child (os.fork's hooks).
"""

import base64
import builtins
import ctypes
import fcntl
import gc
import json
import marshal
import os
import resource
import select
import signal
import socket
import struct
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND = 32, 4096
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2

SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_RULE_PATH_BENEATH = 1

MAX_MESSAGE = 1 << 20

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.unshare.argtypes = [ctypes.c_int]
libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
libc.syscall.restype = ctypes.c_long


class Failed(Exception):
    pass


def check(ret, what):
    if ret < 0:
        e = ctypes.get_errno()
        raise Failed("%s: %s" % (what, os.strerror(e)))
    return ret


def prctl(option, arg2=0, arg3=0):
    return check(libc.prctl(option, arg2, arg3, 0, 0), "prctl %d" % option)


def mount(source, target, fstype, flags, data):
    check(libc.mount(source.encode() if source else None, target.encode(), fstype.encode() if fstype else None,
                     flags, data.encode() if data else None), "mounting %s" % target)


def send(sock, msg, fds=()):
    data = json.dumps(msg).encode()
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.send(data)


def recv(sock):
    """One message and the descriptors that came with it; (None, []) when
    the other end has gone."""
    try:
        data, fds, flags, _ = socket.recv_fds(sock, MAX_MESSAGE, 64, socket.MSG_CMSG_CLOEXEC)
    except OSError:
        return None, []
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    return json.loads(data), fds


def load_runner(path):
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".code"):
        code = marshal.loads(data)
    else:
        code = compile(data, path, "exec", dont_inherit=True)
    g = {"__name__": "__codecell_template__", "__builtins__": builtins}
    exec(code, g)
    return g


def main():
    ctl_fd = int(sys.argv[1])
    prctl(PR_SET_DUMPABLE, 0)
    ctl = socket.socket(fileno=ctl_fd)
    template = load_runner(sys.argv[2]) if len(sys.argv) > 2 else None
    for name in sys.argv[3:]:
        __import__(name)
    # What the template holds stays where it is: the children's collections
    # do not walk it, so do not write to (and copy) its pages.
    gc.collect()
    gc.freeze()
    msg, fds = recv(ctl)
    for fd in fds:
        os.close(fd)
    if not msg or "config" not in msg:
        os._exit(0)
    config = msg["config"]
    config["seccomp"] = base64.b64decode(config["seccomp"])
    # The kernel reaps the children: no zombie outlives its run.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    send(ctl, {"ready": {}})
    netns = make_netns()
    while True:
        msg, fds = recv(ctl)
        if msg is None or msg.get("exit"):
            os._exit(0)
        if "fork" not in msg or not fds:
            for fd in fds:
                os.close(fd)
            continue
        enter = msg["fork"].get("enter", 0) if isinstance(msg["fork"], dict) else 0
        placed = enter > 0 and move_thread(fds[1:1 + enter], fds[1 + enter:])
        try:
            pid = clone_run(netns)
        except Failed as e:
            sock = socket.socket(fileno=fds[0])
            try:
                send(sock, {"error": "the run's sandbox: %s" % e})
            except OSError:
                pass
            sock.detach()
            pid = -1
        if pid == 0:
            # Whatever happens from here ends in this child.
            ctl.detach()
            os.close(ctl_fd)
            run(config, fds, template, placed)
            os._exit(125)  # not reached: run ends the process
        if placed and not move_thread(fds[1 + enter:], ()):
            # This server stands in the run's cgroup: it must fork no more.
            os._exit(125)
        for fd in fds:
            os.close(fd)
        if pid > 0 and netns >= 0:
            os.close(netns)  # the run's now
            netns = -1
        if netns < 0:
            netns = make_netns()


class CloneArgs(ctypes.Structure):
    """struct clone_args as of its first version (64 bytes)."""
    _fields_ = [(name, ctypes.c_uint64) for name in
                ("flags", "pidfd", "child_tid", "parent_tid", "exit_signal", "stack", "stack_size", "tls")]


# The clone goes through a PyDLL function, which keeps the interpreter's
# lock held across the call, as os.fork does.
_clone3 = ctypes.PyDLL(None, use_errno=True).syscall
_clone3.restype = ctypes.c_long
SYS_CLONE3 = 435


def make_netns():
    """A network namespace of its own for the next run, made while the
    server waits for it (making one costs milliseconds, which a run would
    otherwise wait for): the server enters a new one, brings its loopback
    up, keeps a descriptor of it and goes back to its own. Each is given to
    one run only. Returns the descriptor, or -1 (the run then makes its
    own)."""
    try:
        own = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return -1
    try:
        if libc.unshare(CLONE_NEWNET) != 0:
            return -1
        try:
            loopback_up()
            return os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return -1
        finally:
            if libc.setns(own, CLONE_NEWNET) != 0:
                # Never fork runs from a namespace a run may have been
                # given: end the server instead.
                os._exit(125)
    finally:
        os.close(own)


def move_thread(into, back):
    """Moves this thread into the v1 cgroup whose "tasks" files the host
    opened (into), by writing "0", the writer itself: a thread that moves
    itself does not wait for the grace period that moving a process takes.
    On failure it moves back (back) and returns False; if that fails too,
    the server ends."""
    try:
        for fd in into:
            os.write(fd, b"0")
        return True
    except OSError:
        try:
            for fd in back:
                os.write(fd, b"0")
        except OSError:
            os._exit(125)
        return False


def clone_run(netns=-1):
    """Forks P1 into the run's new namespaces at once, as os.fork forks (its
    hooks before and after, in the parent and in the child): one copy of
    the server per run, not one to make the pid namespace and another to
    be its pid 1. The network namespace is netns when one was made ahead
    (see make_netns), else a new one. Returns 0 in the child."""
    flags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID
    if netns < 0:
        flags |= CLONE_NEWNET
    args = CloneArgs(flags=flags, exit_signal=signal.SIGCHLD)
    ctypes.pythonapi.PyOS_BeforeFork()
    pid = _clone3(ctypes.c_long(SYS_CLONE3), ctypes.byref(args), ctypes.c_size_t(ctypes.sizeof(args)))
    if pid == 0:
        ctypes.pythonapi.PyOS_AfterFork_Child()
        if netns >= 0:
            if libc.setns(netns, CLONE_NEWNET) != 0:
                os._exit(125)
            os.close(netns)
        return 0
    err = ctypes.get_errno()
    ctypes.pythonapi.PyOS_AfterFork_Parent()
    if pid < 0:
        raise Failed("making the run's namespaces: %s" % os.strerror(err))
    return pid


def run(config, fds, template, placed):
    """P1: joins the run's cgroup (unless it was born in it: placed) and its
    own cgroup namespace, then supervises the run."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    sock = socket.socket(fileno=fds[0])
    for fd in fds[1:]:
        os.close(fd)  # the cgroups' files, first of all
    try:
        pidfd = os.pidfd_open(os.getpid())
        send(sock, {"hello": True, "placed": placed}, [pidfd])
        os.close(pidfd)
        msg, got = recv(sock)
        for fd in got:
            os.close(fd)
        if not msg or not isinstance(msg.get("go"), dict):
            os._exit(0)
        # Made after the move into the run's cgroup: a cgroup namespace is
        # rooted where its creator stands.
        check(libc.unshare(CLONE_NEWCGROUP), "making the run's cgroup namespace")
        supervise(config, msg["go"], sock, template)
    except Exception as e:
        try:
            send(sock, {"error": "the run's sandbox: %s" % e})
        except OSError:
            pass
    os._exit(125)


def build(config, spec):
    """P1's part of the sandbox: the run's own filesystems and loopback."""
    # Each run's writable places are fresh tmpfs mounts over the template's.
    for m in spec["mounts"]:
        mount(m.get("source") or m["fstype"], m["target"], m["fstype"], m["flags"], m.get("data", ""))
    proc = config["proc"]
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "")
    for name in proc["masked_files"]:
        p = "/proc/" + name
        if os.path.lexists(p):
            mount("/dev/null", p, None, MS_BIND, "")
    for name in proc["masked_dirs"]:
        p = "/proc/" + name
        if os.path.isdir(p):
            mount("tmpfs", p, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555")
    for name in proc["read_only"]:
        p = "/proc/" + name
        if os.path.lexists(p):
            bind_read_only(p)
    loopback_up()


def bind_read_only(p):
    mount(p, p, None, MS_BIND, "")
    st = os.statvfs(p)
    flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV
    for stf, msf in ((os.ST_NOEXEC, MS_NOEXEC), (os.ST_NOATIME, MS_NOATIME),
                     (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME)):
        if st.f_flag & stf:
            flags |= msf
    mount("", p, None, flags, "")


def loopback_up():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, 0x8913, ifr))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 0x1 | 0x40))  # SIOCSIFFLAGS, up and running
    finally:
        s.close()


def supervise(config, spec, sock, template):
    """P1: builds the run's filesystems, starts the job, reaps, reports."""
    prctl(PR_SET_DUMPABLE, 0)
    # pid 1 of its namespace: what a process there sends it is ignored,
    # unless it has a handler; it keeps none.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    build(config, spec)
    oom = os.open("/proc/self/oom_score_adj", os.O_RDWR | os.O_CLOEXEC)
    confine(config)
    if template is None:
        ready_to_spawn(config)
    pidfd = os.pidfd_open(os.getpid())
    send(sock, {"ready": {}}, [pidfd])
    os.close(pidfd)
    msg, fds = recv(sock)
    if not msg or "job" not in msg:
        os._exit(0)
    job = msg["job"]
    if len(fds) < 3:
        raise Failed("a job needs stdin, stdout and stderr")
    if bool(job.get("forked")) != (template is not None):
        raise Failed("a fork server with a runner runs its runner's jobs, and one without runs commands")
    # The workspace and /tmp are tmpfs whose pages count toward the run's
    # memory: when it is full the kernel must end the program, not this
    # process, which has the Result to report. The program inherits the
    # highest score there is, raised here around the fork; this process
    # goes back to its own, which needs no privilege.
    own = os.pread(oom, 16, 0).strip() or b"0"
    os.pwrite(oom, b"1000", 0)
    if template is None:
        try:
            pid = spawn(config, job, fds)
        finally:
            os.pwrite(oom, own, 0)
            os.close(oom)
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        send(sock, {"started": pid})
        wait(sock, pid, pidfd)
        return
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(report_r)
        os.close(oom)
        child(config, job, fds, report_w, template)
        os._exit(125)
    os.pwrite(oom, own, 0)
    os.close(oom)
    pidfd = os.pidfd_open(pid)
    os.close(report_w)
    for fd in fds:
        os.close(fd)
    report = b""
    while True:
        chunk = os.read(report_r, 4096)
        if not chunk:
            break
        report += chunk
    os.close(report_r)
    if report != b"ok":
        kill_all()
        raise Failed(report.decode(errors="replace") or "the program's process ended before it was confined")
    send(sock, {"started": pid})
    wait(sock, pid, pidfd)


def ready_to_spawn(config):
    """What a server without a runner does before its job comes, since no
    job changes it: what the program must not inherit from this process.
    Its groups and gid go for good (it needs neither again), and every
    descriptor it holds closes at an exec. (Those Python opens later close
    at an exec too, and so do those a job brings: recv takes them so.)"""
    uid = config["program_uid"]
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            try:
                os.set_inheritable(fd, False)
            except OSError:
                pass  # the directory listing's own


# Every signal at its default and none blocked at a spawn: this interpreter
# ignores SIGPIPE and SIGXFSZ, which an exec would keep ignored. (The C
# library's posix_spawn leaves its two internal signals, 32 and 33,
# ignored: a program of that C library sets them up itself.)
SPAWN_DEFAULTS = [sig for sig in signal.valid_signals() if sig not in (signal.SIGKILL, signal.SIGSTOP)]


def spawn(config, job, fds):
    """G for a run without a runner: the job's command, started by
    posix_spawn, which shares this process's memory until the exec rather
    than copy it, from a process ready_to_spawn readied. Its uids change
    for the spawn alone (the saved uid stays 0, so it takes them back, and
    its capabilities with them). The exec as the program's user, under
    no_new_privs and with an empty bounding set, leaves the program no
    capability."""
    argv = job.get("argv") or []
    if not argv:
        raise Failed("a job needs a command")
    uid = config["program_uid"]
    limit_and_enter(job)
    # Nothing but the job's descriptors reaches the program: the job's
    # become 0, 1, 2, 3, …, and every other closes at the exec.
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 256) for fd in fds]
    actions = [(os.POSIX_SPAWN_DUP2, fd, i) for i, fd in enumerate(moved)]
    env = dict(kv.split("=", 1) for kv in job.get("env") or [] if "=" in kv)
    os.setresuid(uid, uid, 0)
    try:
        return os.posix_spawn(argv[0], argv, env, file_actions=actions, setsid=True,
                              setsigmask=(), setsigdef=SPAWN_DEFAULTS)
    except OSError as e:
        raise Failed("starting %s: %s" % (argv[0], e.strerror))
    finally:
        os.setresuid(0, 0, 0)
        # A change of uid resets dumpability to fs.suid_dumpable's.
        prctl(PR_SET_DUMPABLE, 0)
        for fd in moved:
            os.close(fd)


def limit_and_enter(job):
    """Sets the job's rlimits (and RLIMIT_CORE to 0: a core dump is a file
    the program did not ask to write) and enters its directory: what the
    program's process inherits."""
    for r in job.get("rlimits") or []:
        v = r["value"]
        v = resource.RLIM_INFINITY if v >= (1 << 64) - 1 else v
        resource.setrlimit(r["resource"], (v, v))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.chdir(job.get("dir") or "/")


def kill_all():
    """Kills every process of the run's pid namespace but this one."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass


def reap_all():
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def wait(sock, pid, pidfd):
    host_gone = False
    while True:
        ready, _, _ = select.select([pidfd] if host_gone else [sock, pidfd], [], [])
        if pidfd in ready:
            _, status = os.waitpid(pid, 0)
            break
        msg, fds = recv(sock)
        for fd in fds:
            os.close(fd)
        if msg is None or msg.get("kill") or msg.get("exit"):
            kill_all()
            host_gone = host_gone or msg is None or bool(msg.get("exit"))
    os.close(pidfd)
    # The program is done: whatever it left running dies with it.
    kill_all()
    reap_all()
    if os.WIFSIGNALED(status):
        info = {"exit_code": -1, "signal": os.WTERMSIG(status)}
    else:
        info = {"exit_code": os.waitstatus_to_exitcode(status), "signal": 0}
    if host_gone:
        os._exit(0)
    send(sock, {"exited": info})
    while True:
        msg, fds = recv(sock)
        for fd in fds:
            os.close(fd)
        if msg is None or msg.get("exit"):
            os._exit(0)


def child(config, job, fds, report_w, template):
    """G: confines itself as the program's process, then runs the job."""
    try:
        os.setsid()
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        # The job's descriptors become 0, 1, 2, 3, ...; nothing else stays.
        moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 256) for fd in fds]
        report_w = fcntl.fcntl(report_w, fcntl.F_DUPFD_CLOEXEC, 256 + len(fds))
        for i, fd in enumerate(moved):
            os.dup2(fd, i, inheritable=True)
        keep = len(moved)
        os.closerange(keep, report_w)
        os.closerange(report_w + 1, 1 << 20)
        limit_and_enter(job)
        drop_privileges(config)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.write(report_w, b"ok")
        os.close(report_w)
    except BaseException as e:
        try:
            os.write(report_w, ("confining the program: %s" % e).encode()[:4000])
        except Exception:
            pass
        os._exit(125)
    message = base64.b64decode(job.get("message") or "")
    template["_codecell_forked"](message)
    os._exit(0)  # _codecell_forked ends the process itself


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def empty_bounding_set(cap_last):
    """Empties the bounding set, and the ambient set: no exec can grant a
    capability. It takes CAP_SETPCAP, and keeps what the process holds."""
    for c in range(cap_last + 1):
        if libc.prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 and ctypes.get_errno() != 22:  # EINVAL: no such capability
            check(-1, "dropping capability %d" % c)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)


def set_caps(keep):
    """Holds keep, effective and permitted, and nothing to inherit."""
    hdr = CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (CapData * 2)()
    data[0].effective = data[0].permitted = keep & 0xFFFFFFFF
    data[1].effective = data[1].permitted = keep >> 32
    check(libc.capset(ctypes.byref(hdr), data), "setting capabilities")


def confine(config):
    """The supervisor's confinement, which the program inherits: an empty
    bounding set, all capabilities but config["supervisor_caps"] dropped for
    good (what a sandbox's init keeps: to start the program as its user and
    kill what it leaves), no_new_privs, Landlock, seccomp —
    what a sandbox's init applies to itself (internal/sandboxinit/init_linux.go's confine), in
    the same order, after the last mount."""
    keep = config["supervisor_caps"]
    # Nothing this process starts can gain a capability by an exec.
    empty_bounding_set(config["cap_last"])
    set_caps(keep)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    if config.get("landlock"):
        landlock(config["landlock"])
    seccomp(config["seccomp"])


def drop_privileges(config):
    """The program's process: no capability now or after any exec (the
    bounding set is empty since confine), as the program's user."""
    uid = config["program_uid"]
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    set_caps(0)


def landlock(plan):
    """Applies the host's Landlock plan (see landlockPlan)."""
    handled = plan["handled"]
    attr = struct.pack("=QQQ", *handled)[:plan["size"]]
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = check(libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), buf, ctypes.c_size_t(len(attr)),
                                 ctypes.c_uint32(0)), "landlock_create_ruleset")
    try:
        for path, access in plan["rules"]:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                if not os.path.isdir("/proc/self/fd/%d" % fd):
                    access &= plan["file_mask"]
                rule = ctypes.create_string_buffer(struct.pack("=Qi", access & handled[0], fd), 12)
                check(libc.syscall(ctypes.c_long(SYS_LANDLOCK_ADD_RULE), ctypes.c_int(ruleset),
                                   ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH), rule, ctypes.c_uint32(0)),
                      "landlock rule for %s" % path)
            finally:
                os.close(fd)
        check(libc.syscall(ctypes.c_long(SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)),
              "landlock_restrict_self")
    finally:
        os.close(ruleset)


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def seccomp(program):
    """Loads the host's seccomp filter (internal/seccomp's) on this thread,
    the process's only one (it requires no_new_privs)."""
    buf = ctypes.create_string_buffer(program, len(program))
    prog = SockFprog(len(program) // 8, ctypes.addressof(buf))
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0), "seccomp")


if __name__ == "__main__":
    main()
