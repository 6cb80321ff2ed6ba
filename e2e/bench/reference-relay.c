/*
 * The floor of any proxy, for the egress benchmark (e2e/bench/egress-bench.js): the least one user-space hop can
 * cost. It listens on 127.0.0.1 (an ephemeral port, printed on stdout) and relays each connection to
 * 127.0.0.1:TARGET, both ways, one process per direction, with no parsing, no checks and no accounting:
 *
 *   reference-relay TARGET_PORT rw       read(2)/write(2) through a 1 MiB buffer
 *   reference-relay TARGET_PORT splice   splice(2) through a 1 MiB pipe (no copy into user space)
 *
 * The proxy the server runs has two hops (the server's proxy, then the sandbox's relay) and checks every
 * connection; this has one and checks nothing. Not part of the product: built by the benchmark with cc.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHUNK (1 << 20)

static int use_splice;

static void pump(int from, int to) {
    if (use_splice) {
        int p[2];
        if (pipe(p) != 0) _exit(1);
        fcntl(p[1], F_SETPIPE_SZ, CHUNK);
        for (;;) {
            ssize_t n = splice(from, NULL, p[1], NULL, CHUNK, SPLICE_F_MOVE);
            if (n <= 0) break;
            while (n > 0) {
                ssize_t w = splice(p[0], NULL, to, NULL, (size_t) n, SPLICE_F_MOVE);
                if (w <= 0) _exit(0);
                n -= w;
            }
        }
    } else {
        static char buf[CHUNK];
        for (;;) {
            ssize_t n = read(from, buf, sizeof buf);
            if (n <= 0) break;
            for (ssize_t off = 0; off < n;) {
                ssize_t w = write(to, buf + off, (size_t) (n - off));
                if (w <= 0) _exit(0);
                off += w;
            }
        }
    }
    shutdown(to, SHUT_WR);
    _exit(0);
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[2], "rw") != 0 && strcmp(argv[2], "splice") != 0)) {
        fprintf(stderr, "usage: reference-relay TARGET_PORT rw|splice\n");
        return 2;
    }
    use_splice = strcmp(argv[2], "splice") == 0;
    signal(SIGCHLD, SIG_IGN);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int l = socket(AF_INET, SOCK_STREAM, 0);
    socklen_t len = sizeof a;
    if (l < 0 || bind(l, (struct sockaddr *) &a, sizeof a) != 0 || listen(l, 64) != 0
            || getsockname(l, (struct sockaddr *) &a, &len) != 0) {
        perror("reference-relay: listen");
        return 1;
    }
    printf("%d\n", ntohs(a.sin_port));
    fflush(stdout);
    struct sockaddr_in t = { .sin_family = AF_INET, .sin_port = htons((unsigned short) atoi(argv[1])),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    for (;;) {
        int c = accept(l, NULL, NULL);
        if (c < 0) continue;
        int u = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        if (u < 0 || connect(u, (struct sockaddr *) &t, sizeof t) != 0) {
            close(c);
            if (u >= 0) close(u);
            continue;
        }
        setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (fork() == 0) pump(c, u);
        if (fork() == 0) pump(u, c);
        close(c);
        close(u);
    }
}
