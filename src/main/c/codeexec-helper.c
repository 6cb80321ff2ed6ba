/*
 * codeexec-helper: the two small steps of every sandboxed run that used to be shell scripts and setpriv, in one
 * static binary (each exec of dash, setpriv or env cost about a millisecond of CPU per run; this costs a tenth),
 * and the server's one-time set-up of the mount namespace those runs start in.
 *
 *   codeexec-helper launch [--cgroup PROCS]... [--rlimit RES=SOFT:HARD]... [--fd N=PATH]... [--wfd N=PATH]...
 *                          [--mntns PATH] --uid UID --gid GID -- PROGRAM [ARG...]
 *       Run by the server as root, first thing in a new process: joins each cgroup (writes its pid to the
 *       cgroup.procs file), sets each rlimit, opens each PATH read-only (--fd) or write-only (--wfd, in order,
 *       after all --fd: a FIFO's open blocks until the server opens the other end) on fd N, then drops to the
 *       unprivileged uid/gid for good (no supplementary groups; real, effective and saved ids; no_new_privs),
 *       checks that root cannot be regained, and execs PROGRAM (bwrap) by its absolute path. Run by a normal user
 *       (not root): --uid/--gid must be its own ids; nothing is dropped (bwrap makes the user namespace), only
 *       no_new_privs is set. Any failure before
 *       the exec: a message on stderr and exit 125, with nothing run.
 *       RES is one of cpu, core, fsize, nofile, as, nproc; SOFT and HARD are numbers or "unlimited".
 *
 *       --mntns PATH: after the fds are open and before dropping privileges, enter the mount namespace PATH
 *       refers to (setns): the trimmed namespace `mntns` made (bwrap copies the mount table of the namespace it
 *       starts in and reads it once per bind, so every host mount it does not need costs every run).
 *
 *   codeexec-helper mntns [--umount MOUNTPOINT]...
 *       Run by the server as root, once: makes a private mount namespace that receives the host's later mounts
 *       (recursive slave of the host's), detaches each MOUNTPOINT (with what is mounted below it) inside it, writes
 *       "ready" to stdout and waits for stdin to close, so that the server can open /proc/PID/ns/mnt and keep the
 *       namespace alive through that descriptor. Nothing changes in the host's namespace. Exit 125 on failure.
 *
 *   /proc/self/fd/N init [--status-fd FD] [--relay SOCKET] [--preview SOCKET] [--nproc N] [--nice N] (PROGRAM [ARG...] | --await-exec)
 *       Pid 1 inside the sandbox (bwrap --as-pid-1), executed through the descriptor the launcher opened on this
 *       binary (--fd N=...), so that nothing of the host's file system is bound into the sandbox for it. It closes
 *       that descriptor and makes itself non-dumpable (the sandboxed program cannot read /proc/1/exe, environ or
 *       fd), starts PROGRAM (found on PATH, as env(1) would) with every signal at its default disposition and
 *       unblocked, reaps every process that ends inside the sandbox while PROGRAM runs, and exits with PROGRAM's
 *       status (128+N when killed by signal N). When pid 1 exits, the kernel kills whatever else is left in the pid
 *       namespace. A PROGRAM that cannot be started: a message as env(1) gives it, exit 127 (not found) or 126.
 *       PROGRAM starts with umask 0002 (files it makes are writable by its group: the tenant's later runs).
 *       --status-fd FD: a pipe to the server (inherited through the launcher and bwrap, never by PROGRAM: it is
 *       close-on-exec), on which init writes PROGRAM's real wait status before it exits, "exit N\n" or
 *       "signal N\n": an exit status cannot tell `exit 130` from death by SIGINT, and bwrap turns init's own death
 *       into an exit status too.
 *       --relay SOCKET: before PROGRAM starts, listen on 127.0.0.1:3128 (inside the sandbox's own network namespace)
 *       and relay every connection accepted there to a new connection to the unix socket SOCKET (the server's
 *       egress proxy, bound into the sandbox), both ways, with half-closes passed on, in init's own poll loop: no
 *       process per connection, nothing the program can signal. At most MAX_RELAYS connections at once; beyond
 *       that, new connections wait in the listen queue. If SOCKET cannot be reached, the accepted connection is
 *       closed: fail closed.
 *       --preview SOCKET: before PROGRAM starts, listen on the unix socket SOCKET (in a directory the server binds
 *       into the sandbox and reaches from outside: a port preview's way in) and, for each connection the server
 *       opens there, read a two-byte port (big-endian), connect to 127.0.0.1:PORT inside the sandbox and answer one
 *       byte, 0 (connected: bytes are then relayed both ways, as --relay's) or 1 (nothing listens there; closed).
 *       In the same poll loop as --relay, sharing its MAX_RELAYS. The sandbox keeps its empty network namespace.
 *       --nice N: a background job's sandbox: its session's autogroup and init (so everything it starts) at
 *       nice N, below interactive runs.
 *       --nproc N: RLIMIT_NPROC of init (and so of everything it starts) at N, set inside the sandbox's user
 *       namespace, where the kernel counts the processes of that namespace's uid only. A server run by a normal user
 *       sets the process limit this way: the launcher's rlimit would count all of that user's own processes too.
 *       --await-exec: a warm sandbox for any language (WARM_POOL): instead of PROGRAM from its arguments, init
 *       writes {"ready":true} on the control-out fd 9, waits for the run message on the control-in fd 8 —
 *       "exec FILELEN CODELEN ARGLEN...\n" then that many bytes of the code file's path, the code, and each
 *       argument of the command (docs/interpreter-protocol.md) — writes the code to FILE unless the server has put it
 *       there already, closes fds 8 and 9, changes into FILE's directory (the working directory may have been
 *       mounted since the start) and starts the command as it starts PROGRAM. End of input before a whole message:
 *       exit 0 (the server discarded the sandbox); a malformed one: exit 125. The sandbox stays at init alone while
 *       it waits (no interpreter, a few hundred KB), and the run costs one fork and exec.
 *
 * Built by Maven (pom.xml, `cc -O2 -static`) into the jar; the server installs it in DATA_DIR/runtime and falls
 * back to the shell launcher, setpriv and a shell init when it is missing or does not run on this machine.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SETUP_FAILED 125
#define MAX_ITEMS 16

static void fail(const char *what, const char *detail) {
    dprintf(2, "codeexec-helper: %s%s%s%s%s\n", what, detail ? ": " : "", detail ? detail : "",
            errno ? ": " : "", errno ? strerror(errno) : "");
    _exit(SETUP_FAILED);
}

static long long number(const char *s, const char *what) {
    if (strcmp(s, "unlimited") == 0) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < 0) { errno = 0; fail("bad number for", what); }
    return v;
}

static int resource(const char *name) {
    if (strcmp(name, "cpu") == 0) return RLIMIT_CPU;
    if (strcmp(name, "core") == 0) return RLIMIT_CORE;
    if (strcmp(name, "fsize") == 0) return RLIMIT_FSIZE;
    if (strcmp(name, "nofile") == 0) return RLIMIT_NOFILE;
    if (strcmp(name, "as") == 0) return RLIMIT_AS;
    if (strcmp(name, "nproc") == 0) return RLIMIT_NPROC;
    errno = 0;
    fail("unknown rlimit", name);
    return -1;
}

static void set_limit(char *spec) {
    char *eq = strchr(spec, '='), *colon = eq ? strchr(eq, ':') : NULL;
    if (!eq || !colon) { errno = 0; fail("bad --rlimit", spec); }
    *eq = 0;
    *colon = 0;
    long long soft = number(eq + 1, spec), hard = number(colon + 1, spec);
    struct rlimit r = { soft < 0 ? RLIM_INFINITY : (rlim_t) soft, hard < 0 ? RLIM_INFINITY : (rlim_t) hard };
    if (setrlimit(resource(spec), &r) != 0) fail("cannot set rlimit", spec);
}

static void join_cgroup(const char *procs) {
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%d\n", (int) getpid());
    int fd = open(procs, O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail("cannot open", procs);
    if (write(fd, pid, (size_t) n) != n) fail("cannot join cgroup", procs);
    close(fd);
}

static void open_on(char *spec, int flags) {
    char *eq = strchr(spec, '=');
    if (!eq) { errno = 0; fail("bad fd spec", spec); }
    *eq = 0;
    long long want = number(spec, "fd");
    if (want < 3 || want > 64) { errno = 0; fail("fd out of range", spec); }
    int fd = open(eq + 1, flags | O_NOCTTY);
    if (fd < 0) fail("cannot open", eq + 1);
    if (fd != want) {
        if (dup2(fd, (int) want) < 0) fail("cannot place fd", spec);
        close(fd);
    }
}

static int launch(int argc, char **argv) {
    char *cgroups[MAX_ITEMS], *limits[MAX_ITEMS], *rfds[MAX_ITEMS], *wfds[MAX_ITEMS];
    int ncg = 0, nlim = 0, nr = 0, nw = 0;
    long long uid = -1, gid = -1;
    const char *mntns = NULL;
    int i = 2;
    for (; i < argc; i++) {
        char *a = argv[i];
        if (strcmp(a, "--") == 0) { i++; break; }
        if (i + 1 >= argc) { errno = 0; fail("missing value for", a); }
        char *v = argv[++i];
        if (strcmp(a, "--cgroup") == 0 && ncg < MAX_ITEMS) cgroups[ncg++] = v;
        else if (strcmp(a, "--rlimit") == 0 && nlim < MAX_ITEMS) limits[nlim++] = v;
        else if (strcmp(a, "--fd") == 0 && nr < MAX_ITEMS) rfds[nr++] = v;
        else if (strcmp(a, "--wfd") == 0 && nw < MAX_ITEMS) wfds[nw++] = v;
        else if (strcmp(a, "--mntns") == 0 && !mntns) mntns = v;
        else if (strcmp(a, "--uid") == 0) uid = number(v, "uid");
        else if (strcmp(a, "--gid") == 0) gid = number(v, "gid");
        else { errno = 0; fail("unknown or repeated option", a); }
    }
    errno = 0;
    if (i >= argc || argv[i][0] != '/') fail("no absolute program path after --", NULL);
    if (uid <= 0 || gid <= 0 || uid > 0x7fffffff || gid > 0x7fffffff) fail("--uid and --gid must be given and not 0", NULL);

    for (int k = 0; k < ncg; k++) join_cgroup(cgroups[k]);
    for (int k = 0; k < nlim; k++) set_limit(limits[k]);
    for (int k = 0; k < nr; k++) open_on(rfds[k], O_RDONLY);
    for (int k = 0; k < nw; k++) open_on(wfds[k], O_WRONLY);
    if (mntns) {
        int ns = open(mntns, O_RDONLY | O_CLOEXEC);
        if (ns < 0) fail("cannot open", mntns);
        if (setns(ns, CLONE_NEWNS) != 0) fail("cannot enter mount namespace", mntns);
        close(ns);
    }

    if (geteuid() != 0) {
        // a server run by a normal user: nothing to drop (bwrap makes its own user namespace); the ids given
        // must be the ones this process has, so a caller's mistake is never silently a different uid
        uid_t r0, e0, s0;
        gid_t gr0, ge0, gs0;
        if (getresuid(&r0, &e0, &s0) != 0 || r0 != uid || e0 != uid || s0 != uid
                || getresgid(&gr0, &ge0, &gs0) != 0 || gr0 != gid || ge0 != gid || gs0 != gid) {
            errno = 0;
            fail("not root: --uid and --gid must be this process's own ids", NULL);
        }
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("no_new_privs", NULL);
        execv(argv[i], &argv[i]);
        fail("cannot run", argv[i]);
    }
    if (setgroups(0, NULL) != 0) fail("setgroups", NULL);
    if (setresgid((gid_t) gid, (gid_t) gid, (gid_t) gid) != 0) fail("setresgid", NULL);
    if (setresuid((uid_t) uid, (uid_t) uid, (uid_t) uid) != 0) fail("setresuid", NULL);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("no_new_privs", NULL);
    uid_t r, e, s;
    gid_t gr, ge, gs;
    errno = 0;
    if (getresuid(&r, &e, &s) != 0 || r != uid || e != uid || s != uid) fail("uid not dropped", NULL);
    if (getresgid(&gr, &ge, &gs) != 0 || gr != gid || ge != gid || gs != gid) fail("gid not dropped", NULL);
    if (getgroups(0, NULL) != 0) fail("supplementary groups left", NULL);
    if (setuid(0) == 0 || setgid(0) == 0) { errno = 0; fail("root could be regained", NULL); }

    execv(argv[i], &argv[i]);
    fail("cannot run", argv[i]);
    return SETUP_FAILED;
}

static int mntns(int argc, char **argv) {
    if (unshare(CLONE_NEWNS) != 0) fail("unshare(CLONE_NEWNS)", NULL);
    // Later host mounts (a workspace bound into a running sandbox) still arrive; nothing goes back.
    if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0) fail("cannot make / a recursive slave", NULL);
    for (int i = 2; i < argc; i++) {
        errno = 0;
        if (strcmp(argv[i], "--umount") != 0 || i + 1 >= argc) fail("bad argument", argv[i]);
        const char *m = argv[++i];
        if (m[0] != '/' || strcmp(m, "/") == 0) fail("not a mount point to detach", m);
        // Repeated for mounts stacked on the same point; EINVAL: not a mount point (any more, or detached with
        // a parent given before it).
        int n = 0;
        while (umount2(m, MNT_DETACH) == 0 && ++n < 64) {
        }
        if (n == 0 && errno != EINVAL && errno != ENOENT) fail("cannot detach", m);
    }
    if (write(1, "ready\n", 6) != 6) fail("cannot write", "ready");
    char buf[64];
    while (read(0, buf, sizeof buf) > 0) {
    }
    return 0;
}

/* Default disposition through the raw system call: glibc's sigaction refuses its two internal real-time signals,
 * which a parent (a JVM) may have left ignored. SIGKILL and SIGSTOP fail harmlessly. */
static void default_signal(int sig) {
    struct { void *handler; unsigned long flags; void *restorer; unsigned long mask; } k = { SIG_DFL, 0, NULL, 0 };
    syscall(SYS_rt_sigaction, sig, &k, NULL, sizeof k.mask);
}


/* --- the egress relay: 127.0.0.1:3128 <-> the server's unix socket, run by init in its poll loop --- */

#define RELAY_PORT 3128 /* the server's egress.EgressChannel.PROXY_PORT (EgressChannelsTest compares them) */
#define MAX_RELAYS 128
#define RELAY_BUF (256 * 1024)

/* One direction of a pair. dead: its receiver went away (EPIPE); what comes from its sender is dropped while the
 * other direction still flows: it may carry the answer that says why (the proxy's 429 before it hung up). */
struct half { char *buf; size_t len, off; int eof, shut, dead; };
/* a: the program's TCP connection, b: the unix socket. awaiting: a preview connection whose port has not come yet (1;
 * a is -1 until it has) or whose connect is in progress (2). */
struct relay { int a, b, awaiting; struct half ab, ba; };

static struct relay relays[MAX_RELAYS];
static int nrelays;
static const char *relay_path;
static const char *preview_path;

static int relay_listen(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(RELAY_PORT), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (bind(fd, (struct sockaddr *) &sa, sizeof sa) != 0 || listen(fd, 256) != 0) { close(fd); return -1; }
    return fd;
}

/* Takes a pair's buffers; 0 when memory is short (the pair is then closed by the caller). */
static int relay_buffers(struct relay *r) {
    r->ab.buf = malloc(RELAY_BUF);
    r->ba.buf = malloc(RELAY_BUF);
    if (r->ab.buf && r->ba.buf) return 1;
    free(r->ab.buf);
    free(r->ba.buf);
    return 0;
}

static int preview_listen(void) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_un su = { .sun_family = AF_UNIX };
    strncpy(su.sun_path, preview_path, sizeof su.sun_path - 1);
    unlink(preview_path); /* a socket left by this sandbox's earlier init (a session restarted in place) */
    if (bind(fd, (struct sockaddr *) &su, sizeof su) != 0 || listen(fd, 64) != 0) { close(fd); return -1; }
    return fd;
}

/* The server's connections to a preview: each waits for its two-byte port before anything is connected. */
static void preview_accept(int pfd) {
    while (nrelays < MAX_RELAYS) {
        int b = accept4(pfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (b < 0) return;
        struct relay *r = &relays[nrelays];
        memset(r, 0, sizeof *r);
        r->a = -1;
        r->b = b;
        r->awaiting = 1;
        if (!relay_buffers(r)) { close(b); return; }
        nrelays++;
    }
}

/* Answers a preview connection: 0 (connected: the relay starts) or 1 (nothing listens; the pair is closed). */
static int preview_answer(struct relay *r, int ok) {
    char answer = ok ? 0 : 1;
    if (write(r->b, &answer, 1) != 1 || !ok) return 0;
    int one = 1;
    setsockopt(r->a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    r->awaiting = 0;
    return 1;
}

/*
 * A preview connection's port arrived (or its sender went away): start connecting to 127.0.0.1:PORT inside the
 * sandbox. Loopback answers at once, unless the program's listen queue is full: then the connect goes on in the poll
 * loop (awaiting 2) while the kernel retries, and nothing else in the sandbox waits for it. Returns 0 when the pair
 * must be closed.
 */
static int preview_connect(struct relay *r) {
    unsigned char port[2];
    if (recv(r->b, port, sizeof port, MSG_WAITALL) != (ssize_t) sizeof port) return 0;
    int p = (port[0] << 8) | port[1];
    int a = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (a < 0) return preview_answer(r, 0);
    r->a = a;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((unsigned short) p), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (p > 0 && connect(a, (struct sockaddr *) &sa, sizeof sa) == 0) return preview_answer(r, 1);
    if (p > 0 && errno == EINPROGRESS) { r->awaiting = 2; return 1; }
    return preview_answer(r, 0);
}

/* A connect in progress has finished: connected, or refused. */
static int preview_connected(struct relay *r) {
    int err = 0;
    socklen_t len = sizeof err;
    return preview_answer(r, getsockopt(r->a, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0);
}

static void relay_accept(int lfd) {
    while (nrelays < MAX_RELAYS) {
        int a = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (a < 0) return;
        int b = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        struct sockaddr_un su = { .sun_family = AF_UNIX };
        strncpy(su.sun_path, relay_path, sizeof su.sun_path - 1);
        if (b < 0 || connect(b, (struct sockaddr *) &su, sizeof su) != 0) {
            /* fail closed: no way out, so no connection */
            if (b >= 0) close(b);
            close(a);
            continue;
        }
        int one = 1, big = 2 * 1024 * 1024;
        setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        /* the unix socket's default buffers (~200 KiB) halve a download's rate; the kernel caps this at wmem_max */
        setsockopt(b, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
        setsockopt(b, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
        struct relay *r = &relays[nrelays];
        memset(r, 0, sizeof *r);
        r->a = a;
        r->b = b;
        if (!relay_buffers(r)) {
            close(a);
            close(b);
            return;
        }
        nrelays++;
    }
}

/* Moves what it can from src through h to dst; returns -1 when the pair must be closed. */
static int relay_move(int src, int dst, struct half *h) {
    for (;;) {
        if (h->dead) return 0;
        if (h->len > h->off) {
            ssize_t w = write(dst, h->buf + h->off, h->len - h->off);
            if (w < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
            if (w < 0) {
                h->dead = 1;
                h->len = h->off = 0;
                shutdown(src, SHUT_RD);
                return 0;
            }
            h->off += (size_t) w;
            if (h->off < h->len) return 0;
            h->off = h->len = 0;
        }
        if (h->eof) {
            if (!h->shut) { shutdown(dst, SHUT_WR); h->shut = 1; }
            return 0;
        }
        ssize_t n = read(src, h->buf, RELAY_BUF);
        if (n == 0) { h->eof = 1; continue; }
        if (n < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
        h->len = (size_t) n;
    }
}

static void relay_close(int i) {
    if (relays[i].a >= 0) close(relays[i].a);
    close(relays[i].b);
    free(relays[i].ab.buf);
    free(relays[i].ba.buf);
    relays[i] = relays[--nrelays];
}

/* One round of the relay: poll the listeners, every pair and the signalfd; returns when a child may have ended. */
static void relay_round(int lfd, int pfd, int sfd) {
    struct pollfd p[3 + 2 * MAX_RELAYS];
    int n = 0;
    p[n++] = (struct pollfd) { .fd = sfd, .events = POLLIN };
    p[n++] = (struct pollfd) { .fd = nrelays < MAX_RELAYS ? lfd : -1, .events = POLLIN };
    p[n++] = (struct pollfd) { .fd = nrelays < MAX_RELAYS ? pfd : -1, .events = POLLIN };
    for (int i = 0; i < nrelays; i++) {
        struct relay *r = &relays[i];
        if (r->awaiting == 1) { /* its port */
            p[n++] = (struct pollfd) { .fd = -1 };
            p[n++] = (struct pollfd) { .fd = r->b, .events = POLLIN };
            continue;
        }
        if (r->awaiting == 2) { /* its connect; the server's hang-up ends the wait */
            p[n++] = (struct pollfd) { .fd = r->a, .events = POLLOUT };
            p[n++] = (struct pollfd) { .fd = r->b, .events = 0 };
            continue;
        }
        /* read a side while its buffer is empty and it has not ended; wait to write while data is pending */
        short ea = (short) ((!r->ab.eof && !r->ab.dead && r->ab.len == 0 ? POLLIN : 0) | (r->ba.len > r->ba.off ? POLLOUT : 0));
        short eb = (short) ((!r->ba.eof && !r->ba.dead && r->ba.len == 0 ? POLLIN : 0) | (r->ab.len > r->ab.off ? POLLOUT : 0));
        /* a side that has said all it will and has nothing to receive is left out while the other side still
         * waits to deliver to its reader: its hang-up would otherwise wake every poll (a busy loop in pid 1).
         * Once that delivery is done it is polled again, and its hang-up ends the pair. */
        int quiet_a = (r->ab.eof || r->ab.dead) && r->ba.len == r->ba.off && r->ab.len > r->ab.off;
        int quiet_b = (r->ba.eof || r->ba.dead) && r->ab.len == r->ab.off && r->ba.len > r->ba.off;
        p[n++] = (struct pollfd) { .fd = quiet_a ? -1 : r->a, .events = ea };
        p[n++] = (struct pollfd) { .fd = quiet_b ? -1 : r->b, .events = eb };
    }
    if (poll(p, (nfds_t) n, -1) < 0) return;
    int count = (n - 3) / 2;
    for (int i = count - 1; i >= 0; i--) {
        struct relay *r = &relays[i];
        short ra = p[3 + 2 * i].revents, rb = p[4 + 2 * i].revents;
        if (!ra && !rb) continue;
        if (r->awaiting == 1) {
            if (!preview_connect(r)) relay_close(i);
            continue;
        }
        if (r->awaiting == 2) {
            if (rb & (POLLHUP | POLLERR)) relay_close(i); /* the server went away while it waited */
            else if ((ra & (POLLOUT | POLLERR | POLLHUP)) && !preview_connected(r)) relay_close(i);
            continue;
        }
        int moved = relay_move(r->a, r->b, &r->ab) < 0 || relay_move(r->b, r->a, &r->ba) < 0;
        /* a peer that hung up entirely (the proxy after its answer) reads nothing more: drop what goes to it */
        if ((rb & POLLHUP) && r->ba.eof && r->ba.len == r->ba.off) { r->ab.dead = 1; r->ab.len = r->ab.off = 0; }
        if ((ra & POLLHUP) && r->ab.eof && r->ab.len == r->ab.off) { r->ba.dead = 1; r->ba.len = r->ba.off = 0; }
        if (moved
                || (((ra | rb) & POLLERR) && r->ba.len == r->ba.off && r->ab.len == r->ab.off)
                || ((r->ab.shut || r->ab.dead) && (r->ba.shut || r->ba.dead))) {
            relay_close(i);
        }
    }
    if (p[1].revents & POLLIN) relay_accept(lfd);
    if (p[2].revents & POLLIN) preview_accept(pfd);
}

#define AWAIT_IN 8
#define AWAIT_OUT 9
#define AWAIT_MAX_FIELDS 4096

static int read_full(int fd, char *buf, size_t len) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, buf + got, len - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        got += (size_t) n;
    }
    return 0;
}

/*
 * --await-exec: the run message, as a NULL-terminated argv whose [0] is the code file and [1] the code, the
 * command from [2]; NULL at end of input (the sandbox was discarded). Exits 125 on a malformed message.
 */
static char **await_exec_message(void) {
    if (dprintf(AWAIT_OUT, "{\"ready\":true}\n") < 0) fail("--await-exec: cannot write the ready line", NULL);
    char header[AWAIT_MAX_FIELDS * 12];
    size_t h = 0;
    for (;;) {
        if (h == sizeof header - 1) { errno = 0; fail("--await-exec: header too long", NULL); }
        ssize_t n = read(AWAIT_IN, header + h, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return NULL;
        if (header[h] == '\n') break;
        h++;
    }
    header[h] = 0;
    if (strncmp(header, "exec ", 5) != 0) { errno = 0; fail("--await-exec: not an exec message", NULL); }
    size_t lens[AWAIT_MAX_FIELDS], count = 0, total = 0;
    char *p = header + 5, *end;
    while (*p) {
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno || end == p || (*end && *end != ' ') || count == AWAIT_MAX_FIELDS || v > (1ULL << 30)) {
            errno = 0;
            fail("--await-exec: bad lengths", NULL);
        }
        lens[count++] = (size_t) v;
        total += (size_t) v;
        p = *end ? end + 1 : end;
    }
    if (count < 3 || total > (1ULL << 31)) { errno = 0; fail("--await-exec: needs a file, the code and a command", NULL); }
    char *data = malloc(total + count);
    char **fields = calloc(count + 1, sizeof *fields);
    if (!data || !fields) fail("--await-exec: out of memory", NULL);
    char *at = data;
    for (size_t i = 0; i < count; i++) {
        if (lens[i] && read_full(AWAIT_IN, at, lens[i]) != 0) return NULL;
        at[lens[i]] = 0;
        if (i != 1 && memchr(at, 0, lens[i])) { errno = 0; fail("--await-exec: NUL in a name", NULL); }
        fields[i] = at;
        at += lens[i] + 1;
    }
    fields[count] = NULL;
    if (fields[0][0] != '/') { errno = 0; fail("--await-exec: the file is not an absolute path", NULL); }
    /* the code file where a cold run has it, unless the server placed it (a late-mounted working directory) */
    int fd = open(fields[0], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
    if (fd >= 0) {
        size_t off = 0;
        while (off < lens[1]) {
            ssize_t n = write(fd, fields[1] + off, lens[1] - off);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) fail("--await-exec: cannot write the code file", fields[0]);
            off += (size_t) n;
        }
        close(fd);
    } else if (errno != EEXIST) {
        fail("--await-exec: cannot create the code file", fields[0]);
    }
    close(AWAIT_IN);
    close(AWAIT_OUT);
    char *slash = strrchr(fields[0], '/');
    *slash = 0;
    if (chdir(slash == fields[0] ? "/" : fields[0]) != 0) fail("--await-exec: cannot enter the working directory", NULL);
    *slash = '/';
    return fields;
}

static int init(int argc, char **argv) {
    int program = 2, status_fd = -1, await_exec = 0;
    for (;;) {
        if (argc >= program + 2 && strcmp(argv[program], "--status-fd") == 0) {
            errno = 0;
            long long fd = number(argv[program + 1], "--status-fd");
            if (fd < 3 || fd > 64 || fcntl((int) fd, F_SETFD, FD_CLOEXEC) != 0) fail("bad --status-fd", argv[program + 1]);
            status_fd = (int) fd;
            program += 2;
        } else if (argc >= program + 2 && strcmp(argv[program], "--nproc") == 0) {
            // set here, inside the sandbox's user namespace, where the kernel counts only the processes of this
            // namespace's uid; set by the launcher (outside), it would count every process of the host uid
            errno = 0;
            long long n = number(argv[program + 1], "--nproc");
            struct rlimit rl = { (rlim_t) n, (rlim_t) n };
            if (n < 1 || setrlimit(RLIMIT_NPROC, &rl) != 0) fail("cannot set the process limit", argv[program + 1]);
            program += 2;
        } else if (argc >= program + 2 && strcmp(argv[program], "--nice") == 0) {
            // a background job: a lower priority for its whole sandbox, best effort (a priority, not a bound: the
            // run's cgroup cpu.weight is what holds where cgroup v2 has the cpu controller). bwrap's --new-session
            // made the sandbox a session of its own, and with autogroups on (the default of most kernels) the
            // scheduler weighs sessions against each other before any nice value counts: so the session's
            // autogroup is set to the value (the kernel takes one such write per 100 ms from an unprivileged
            // process: EAGAIN is tried again, five times), then init's own nice value, never lowered (that needs a
            // privilege a server run at a high nice value does not have). Before PR_SET_DUMPABLE below: after it,
            // /proc/self is no longer init's to write. Nothing here fails the run.
            errno = 0;
            long long n = number(argv[program + 1], "--nice");
            if (n < 0 || n > 19) fail("bad --nice", argv[program + 1]);
            int ag = open("/proc/self/autogroup", O_WRONLY | O_CLOEXEC);
            if (ag >= 0) {
                char v[8];
                int len = snprintf(v, sizeof v, "%lld", n);
                for (int tries = 0; tries < 5; tries++) {
                    if (write(ag, v, (size_t) len) >= 0 || errno != EAGAIN) break;
                    struct timespec pause = { 0, 110 * 1000 * 1000 };
                    nanosleep(&pause, NULL);
                }
                close(ag);
            }
            errno = 0;
            int now = getpriority(PRIO_PROCESS, 0);
            if (errno == 0 && now < n) (void) setpriority(PRIO_PROCESS, 0, (int) n);
            program += 2;
        } else if (argc >= program + 1 && strcmp(argv[program], "--await-exec") == 0) {
            await_exec = 1;
            program += 1;
        } else if (argc >= program + 2 && strcmp(argv[program], "--relay") == 0) {
            relay_path = argv[program + 1];
            if (strlen(relay_path) >= sizeof(((struct sockaddr_un *) 0)->sun_path)) { errno = 0; fail("--relay path too long", NULL); }
            program += 2;
        } else if (argc >= program + 2 && strcmp(argv[program], "--preview") == 0) {
            preview_path = argv[program + 1];
            if (strlen(preview_path) >= sizeof(((struct sockaddr_un *) 0)->sun_path)) { errno = 0; fail("--preview path too long", NULL); }
            program += 2;
        } else {
            break;
        }
    }
    int lfd = -1, pfd = -1;
    if (relay_path) {
        lfd = relay_listen();
        if (lfd < 0) dprintf(2, "codeexec-helper: the egress proxy cannot listen on 127.0.0.1:%d: %s\n", RELAY_PORT, strerror(errno));
    }
    if (preview_path) {
        pfd = preview_listen();
        if (pfd < 0) dprintf(2, "codeexec-helper: previews cannot listen on %s: %s\n", preview_path, strerror(errno));
    }
    if (!await_exec && argc <= program) { dprintf(2, "codeexec-helper: init needs a program\n"); return 125; }
    const char *self = "/proc/self/fd/";
    if (strncmp(argv[0], self, strlen(self)) == 0) close(atoi(argv[0] + strlen(self)));
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    char **command = &argv[program];
    if (await_exec) {
        char **fields = await_exec_message();
        if (!fields) return 0;
        command = &fields[2];
    }
    sigset_t all;
    sigfillset(&all);
    // Blocked until the child exists, so that nothing is missed; the child unblocks everything.
    sigprocmask(SIG_BLOCK, &all, NULL);
    pid_t child = fork();
    if (child < 0) { dprintf(2, "codeexec-helper: fork: %s\n", strerror(errno)); return 125; }
    if (child == 0) {
        // Group-writable by default: each run is a uid of its own, and a tenant's later runs (other uids of the
        // same group) must be able to change what this one leaves in a workspace.
        umask(0002);
        for (int sig = 1; sig < NSIG; sig++) default_signal(sig);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execvp(command[0], command);
        int err = errno;
        dprintf(2, "env: '%s': %s\n", command[0], strerror(err));
        _exit(err == ENOENT ? 127 : 126);
    }
    // Pid 1 gets no signal it has no handler for from inside its namespace; from outside, SIGKILL only (the
    // server kills the whole tree). It waits, and relays when asked to: then SIGCHLD (still blocked) arrives on a
    // signalfd in the same poll as the connections.
    int sfd = -1, relaying = lfd >= 0 || pfd >= 0;
    if (relaying) {
        sigset_t chld;
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        sfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
        if (sfd < 0) {
            if (lfd >= 0) close(lfd);
            if (pfd >= 0) close(pfd);
            lfd = pfd = -1;
            relaying = 0;
        }
    }
    for (;;) {
        int status;
        if (relaying) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) > 0) {
            }
            pid_t done = waitpid(-1, &status, WNOHANG);
            if (done == 0) { relay_round(lfd, pfd, sfd); continue; }
            if (done < 0) return 125;
            if (done != child) continue;
        }
        pid_t done = relaying ? child : waitpid(-1, &status, 0);
        if (done < 0) {
            if (errno == EINTR) continue;
            return 125;
        }
        if (done == child) {
            if (WIFEXITED(status)) {
                if (status_fd >= 0) dprintf(status_fd, "exit %d\n", WEXITSTATUS(status));
                return WEXITSTATUS(status);
            }
            if (WIFSIGNALED(status)) {
                if (status_fd >= 0) dprintf(status_fd, "signal %d\n", WTERMSIG(status));
                return 128 + WTERMSIG(status);
            }
        }
    }
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "launch") == 0) return launch(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "init") == 0) return init(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "mntns") == 0) return mntns(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
        puts("codeexec-helper 5");
        return 0;
    }
    dprintf(2, "usage: codeexec-helper launch ... -- PROGRAM [ARG...] | init [--status-fd FD] [--relay SOCKET] [--preview SOCKET] [--nproc N] [--nice N] (PROGRAM [ARG...] | --await-exec) | mntns [--umount DIR]...\n");
    return 2;
}
