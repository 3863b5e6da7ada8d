//go:build linux

package attack_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codecell-dev/codecell"
	"github.com/codecell-dev/codecell/internal/proc"
	"github.com/codecell-dev/codecell/tier/native"
)

// outliveProgram leaves behind a process tagged $MARK in argv, in the way
// $KIND names, waits until it runs, and then exits, or with MODE=timeout
// blocks until the Exec's timeout.
const outliveProgram = `
M="$MARK"
daemon='import os, sys, signal
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
    signal.signal(s, signal.SIG_IGN)
os.chdir("/")
os.execv("/bin/sleep", [sys.argv[1], "300"])'
case "$KIND" in
double-fork)    ( ( exec -a "$M" sleep 300 ) & ) ;;
setsid)         setsid bash -c 'exec -a "$0" sleep 300' "$M" & ;;
nohup)          nohup bash -c 'exec -a "$0" sleep 300' "$M" >/dev/null 2>&1 & ;;
ignore-signals) bash -c 'trap "" TERM HUP INT QUIT; exec -a "$0" sleep 300' "$M" </dev/null >/dev/null 2>&1 & ;;
python-daemon)  /usr/bin/python3 -c "$daemon" "$M" </dev/null >/dev/null 2>&1 & ;;
stopped)        bash -c 'exec -a "$0" sleep 300' "$M" & ;;
esac
running() {
  for f in /proc/[0-9]*/cmdline; do
    c=$(tr '\0' ' ' < "$f" 2>/dev/null)
    case "$c" in *"$M"*) return 0 ;; esac
  done
  return 1
}
found=
for i in $(seq 100); do
  if running; then found=1; break; fi
  sleep 0.05
done
[ -n "$found" ] || { echo "the tagged process never ran"; exit 3; }
if [ "$KIND" = stopped ]; then kill -STOP $!; fi
echo "the tagged process runs"
sleep 1 # for the host to see it
if [ "$MODE" = timeout ]; then sleep 300; fi
`

func attackOutlive(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"double-fork", "setsid", "nohup", "ignore-signals", "python-daemon", "stopped"} {
		for _, mode := range []string{"exit", "timeout"} {
			t.Run(kind+"-"+mode, func(t *testing.T) {
				t.Parallel()
				m := marker("outlive")
				stop := make(chan struct{})
				seen := watchHostProcs(m, stop)
				x := codecell.Exec{Language: "bash", Code: outliveProgram, Env: map[string]string{"MARK": m, "KIND": kind, "MODE": mode}}
				want := codecell.StatusSuccess
				if mode == "timeout" {
					x.Limits.Timeout = 3 * time.Second
					want = codecell.StatusTimeout
				}
				res := run(t, x)
				close(stop)
				if res.Status != want || !strings.Contains(res.Stdout, "the tagged process runs") {
					t.Fatalf("want %s after the tagged process ran: %s", want, describe(res))
				}
				// Evidence that the host-side scan sees sandboxed processes:
				// without it, "none left" below would prove nothing.
				if pids := <-seen; len(pids) == 0 {
					t.Errorf("the host never saw the tagged process while the program ran")
				}
				waitNoHostProcs(t, m)
			})
		}
	}
}

// signalProgram tries to signal host processes by their host pids
// (TEST_PID, SLEEPER_PID), which it should not even see. With BROAD=1, and
// only when neither host pid is visible (ESRCH), it also SIGKILLs them,
// every pid of its namespace, and its init.
const signalProgram = `
test, sleeper = int(os.environ['TEST_PID']), int(os.environ['SLEEPER_PID'])
R['probe-test'] = attempt(lambda: os.kill(test, 0))
R['probe-sleeper'] = attempt(lambda: os.kill(sleeper, 0))
R['pidfd-sleeper'] = attempt(lambda: os.close(os.pidfd_open(sleeper)))
R['term-sleeper'] = attempt(lambda: os.kill(sleeper, signal.SIGTERM))
if os.environ.get('BROAD') == '1' and R['probe-test'] == 'ESRCH' and R['probe-sleeper'] == 'ESRCH':
    R['kill-test'] = attempt(lambda: os.kill(test, signal.SIGKILL))
    R['kill-sleeper'] = attempt(lambda: os.kill(sleeper, signal.SIGKILL))
    R['kill-group-test'] = attempt(lambda: os.killpg(test, signal.SIGKILL))
    hits = []
    for pid in range(2, int(read_all('/proc/sys/kernel/pid_max')) + 1):
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
                hits.append(pid)
            except OSError:
                pass
    R['sweep'] = 'ok:%s' % hits if hits else 'ESRCH'
    R['kill-init'] = attempt(lambda: os.kill(1, signal.SIGKILL))
    R['term-init'] = attempt(lambda: os.kill(1, signal.SIGTERM))
    time.sleep(0.3)
R['survived'] = 'ok'
`

// killAllProgram is the shell's kill -9 -1, and a kill of init.
const killAllProgram = `
# Only where the host's pid is not even visible (ESRCH): never a kill -1
# where it could reach the host's processes.
if err=$(kill -0 "$SLEEPER_PID" 2>&1); then echo "the host sleeper is visible"; exit 3; fi
case "$err" in *"No such process"*) ;; *) echo "the host sleeper is visible: $err"; exit 3 ;; esac
kill -9 -1; echo "kill -9 -1: $?"
kill -9 1; echo "kill -9 1: $?"
sleep 0.3
echo survived
`

// alive reports whether a host pid is a live process (not a zombie).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	p, ok := proc.Stat(pid)
	return ok && !p.Dead()
}

func attackSignals(t *testing.T) {
	t.Parallel()
	t.Run("host-pids", func(t *testing.T) {
		t.Parallel()
		sleeper := startHostSleeper(t, "signal")
		env := map[string]string{"TEST_PID": strconv.Itoa(os.Getpid()), "SLEEPER_PID": strconv.Itoa(sleeper.Process.Pid), "BROAD": "1"}
		// The sweep signals every pid up to pid_max, millions on a large
		// host: a generous time limit, so that a loaded machine does not
		// cut it short.
		r, _ := probes(t, codecell.Exec{Env: env, Limits: codecell.Limits{Timeout: 90 * time.Second}}, signalProgram)
		for _, p := range []string{"probe-test", "probe-sleeper", "pidfd-sleeper", "term-sleeper", "kill-test", "kill-sleeper", "kill-group-test", "sweep"} {
			t.Run(p, func(t *testing.T) { expectErrno(t, r, p, "ESRCH") })
		}
		t.Run("kill-init", func(t *testing.T) {
			// Init ignores what its namespace sends it, and the program's
			// uid may not signal it at all; either way the run went on and
			// reported (probes returned), which is the point.
			for _, p := range []string{"kill-init", "term-init"} {
				if got := r[p]; got != "EPERM" && got != "ok" {
					t.Errorf("%s: got %q", p, got)
				}
			}
			expectOK(t, r, "survived")
		})
		t.Run("host-sleeper-alive", func(t *testing.T) {
			if !alive(sleeper.Process.Pid) {
				t.Errorf("the host sleeper (pid %d) died", sleeper.Process.Pid)
			}
		})
	})

	t.Run("kill-minus-one", func(t *testing.T) {
		t.Parallel()
		sleeper := startHostSleeper(t, "signal")
		res := run(t, codecell.Exec{Language: "bash", Code: killAllProgram, Env: map[string]string{"SLEEPER_PID": strconv.Itoa(sleeper.Process.Pid)}})
		if res.Status != codecell.StatusSuccess || !strings.Contains(res.Stdout, "survived") {
			t.Errorf("the program did not complete and report after kill -9 -1 and kill -9 1: %s", describe(res))
		}
		if !alive(sleeper.Process.Pid) {
			t.Errorf("the host sleeper (pid %d) died", sleeper.Process.Pid)
		}
	})

	// With no isolation the same program's SIGTERM reaches the host sleeper
	// by its pid: the host-side check sees a signal that gets through. (No
	// BROAD: nothing but the test's own sleeper is signalled.)
	t.Run("local-control", func(t *testing.T) {
		t.Parallel()
		sleeper := startHostSleeper(t, "signal")
		env := map[string]string{"TEST_PID": strconv.Itoa(os.Getpid()), "SLEEPER_PID": strconv.Itoa(sleeper.Process.Pid)}
		r, _ := probes(t, codecell.Exec{Tier: "local", Env: env}, signalProgram)
		expectOK(t, r, "term-sleeper")
		deadline := time.Now().Add(2 * time.Second)
		for alive(sleeper.Process.Pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(sleeper.Process.Pid) {
			t.Errorf("local control: the host sleeper survived a SIGTERM: the liveness check would miss a kill")
		}
	})
}

// forkBombProgram forks up to 1000 children that each sleep briefly, stops
// at the first failure, and holds its children while the host counts.
const forkBombProgram = `
import os, time, errno
forked, err = 0, None
for i in range(1000):
    try:
        pid = os.fork()
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno))
        break
    if pid == 0:
        time.sleep(2)
        os._exit(0)
    forked += 1
time.sleep(0.5)
{"forked": forked, "errno": err}
`

// threadBombProgram starts up to 1000 threads (the pids controller counts
// threads as tasks).
const threadBombProgram = `
import threading, time
started, err = 0, None
stop = threading.Event()
for i in range(1000):
    try:
        threading.Thread(target=stop.wait, args=(2,), daemon=True).start()
    except RuntimeError as e:
        err = str(e)
        break
    started += 1
time.sleep(0.5)
stop.set()
{"forked": started, "errno": err}
`

// hostUIDProcs lists host pids whose real uid is uid.
func hostUIDProcs(uid int) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(st), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "Uid:" && f[1] == strconv.Itoa(uid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

var hostUIDPattern = regexp.MustCompile(`host uid (\d+)`)

// programHostUID reads the program's host uid from the Result's isolation.
func programHostUID(t *testing.T, res *codecell.Result) int {
	t.Helper()
	m := hostUIDPattern.FindStringSubmatch(res.Isolation.User)
	if m == nil {
		t.Fatalf("the Result does not name the program's host uid: %q", res.Isolation.User)
	}
	uid, _ := strconv.Atoi(m[1])
	return uid
}

// sandboxUIDCounts counts the host's processes by real uid, for the uids
// the native tier gives sandboxes.
func sandboxUIDCounts() map[int]int {
	counts := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(st), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "Uid:" {
				if uid, err := strconv.Atoi(f[1]); err == nil && uid >= native.DefaultUIDBase {
					counts[uid]++
				}
			}
		}
	}
	return counts
}

// attackForkBomb runs alone (not parallel). It watches the host's processes
// by uid while the bomb runs: the sandbox's program runs as a host uid of its
// own, so its processes are counted exactly, whatever else the host (other
// tests, other packages' tests) is doing meanwhile.
func attackForkBomb(t *testing.T) {
	const limit = 64
	for _, c := range []struct{ name, src, errno string }{
		{"fork", forkBombProgram, "EAGAIN"},
		{"threads", threadBombProgram, "can't start new thread"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stop := make(chan struct{})
			peaks := make(chan map[int]int, 1)
			go func() {
				max := map[int]int{}
				for {
					for uid, n := range sandboxUIDCounts() {
						if n > max[uid] {
							max[uid] = n
						}
					}
					select {
					case <-stop:
						peaks <- max
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
			}()
			res := run(t, codecell.Exec{Code: c.src, Limits: codecell.Limits{Processes: limit, Timeout: 5 * time.Second}})
			close(stop)
			max := <-peaks
			var v struct {
				Forked int    `json:"forked"`
				Errno  string `json:"errno"`
			}
			if res.Status != codecell.StatusSuccess || json.Unmarshal(res.Value, &v) != nil {
				t.Fatalf("the bomb did not end by itself: %s", describe(res))
			}
			if v.Forked >= limit || !strings.Contains(v.Errno, c.errno) {
				t.Errorf("started %d (limit %d) and then %q, want a refusal with %s", v.Forked, limit, v.Errno, c.errno)
			}
			if rootless() { // the sandbox has no host uid of its own to count by
				return
			}
			uid := programHostUID(t, res)
			t.Logf("started %d before %q; the sandbox's host uid %d had at most %d processes", v.Forked, v.Errno, uid, max[uid])
			// The pids limit counts tasks, threads included, and init runs as
			// another uid: the program's uid can never hold more than the limit.
			if max[uid] > limit {
				t.Errorf("the host saw %d processes of the sandbox's uid %d, over the limit of %d", max[uid], uid, limit)
			}
			if c.name == "fork" && max[uid] < 8 {
				t.Errorf("the host saw only %d processes of the sandbox's uid %d during a fork bomb: the count is not watching the right uid", max[uid], uid)
			}
			deadline := time.Now().Add(2 * time.Second)
			for len(hostUIDProcs(uid)) > 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if left := hostUIDProcs(uid); len(left) > 0 {
				t.Errorf("processes of the sandbox's host uid %d remain: %v", uid, left)
			}
		})
	}
}
