// rendezvous.c: TCP rendezvous at MASTER_ADDR:MASTER_PORT (see rendezvous.h).
// Wire format, all little-endian uint32: a peer sends {MAGIC, rank, world, size}; rank 0
// answers {status, rank 0's world} and, when status is 0, the blob.
#include "dist/rendezvous.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kernels/error.h"

enum { MAGIC = 0x44445052u /* "RPDD" */, MAX_WORLD = 1 << 20 };
enum { STATUS_OK = 0, STATUS_WORLD_MISMATCH = 1, STATUS_BAD_RANK = 2, STATUS_SIZE_MISMATCH = 3 };

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

// Waits until fd is ready for `events` or the deadline passes: 1 ready, 0 timeout, -1 error.
static int wait_fd(int fd, short events, double deadline)
{
    for (;;) {
        double left = deadline - now_ms();
        if (left <= 0) return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, (int)(left + 1));
        if (r > 0) return 1;
        if (r < 0 && errno != EINTR) return -1;
    }
}

// Sends or receives exactly len bytes before the deadline: 0, or -1 with errno
// (ETIMEDOUT, ECONNRESET for a peer that closed).
static int io_all(int fd, void *buf, size_t len, bool sending, double deadline)
{
    char *p = buf;
    while (len > 0) {
        int w = wait_fd(fd, sending ? POLLOUT : POLLIN, deadline);
        if (w == 0) { errno = ETIMEDOUT; return -1; }
        if (w < 0) return -1;
        ssize_t n = sending ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (n == 0) { errno = ECONNRESET; return -1; }
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int resolve(const DistEnv *env, struct sockaddr_storage *addr, socklen_t *len)
{
    char port[16];
    snprintf(port, sizeof port, "%d", env->master_port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(env->master_addr, port, &hints, &res);
    if (rc != 0)
        return error_set(ERROR_BAD_USAGE, "rank %d: MASTER_ADDR='%s' does not resolve: %s", env->rank,
                         env->master_addr, gai_strerror(rc));
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

// Rank 0: bind, accept world - 1 peers, check them, send the blob.
static int serve(const DistEnv *env, const void *blob, size_t size, int timeout_ms)
{
    struct sockaddr_storage addr;
    socklen_t addr_len;
    TRY(resolve(env, &addr, &addr_len));
    int listener = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0) return error_set(ERROR_LIBRARY, "rank 0: socket: %s", strerror(errno));
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(listener, (struct sockaddr *)&addr, addr_len) != 0) {
        int e = errno;
        close(listener);
        if (e == EADDRINUSE)
            return error_set(ERROR_BAD_USAGE, "rank 0: MASTER_PORT %d on %s is in use (another job?): choose a free port",
                             env->master_port, env->master_addr);
        return error_set(ERROR_BAD_USAGE, "rank 0: cannot bind %s:%d (MASTER_ADDR must be this host): %s",
                         env->master_addr, env->master_port, strerror(e));
    }
    if (listen(listener, env->world) != 0) {
        close(listener);
        return error_set(ERROR_LIBRARY, "rank 0: listen: %s", strerror(errno));
    }
    int peers[env->world];
    for (int r = 0; r < env->world; r++) peers[r] = -1;
    double deadline = now_ms() + timeout_ms;
    int arrived = 0, rc = 0;
    while (arrived < env->world - 1 && rc == 0) {
        int w = wait_fd(listener, POLLIN, deadline);
        if (w <= 0) {
            char missing[256] = "";
            size_t used = 0;
            for (int r = 1; r < env->world && used + 12 < sizeof missing; r++)
                if (peers[r] < 0) used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d", used ? "," : "", r);
            rc = error_set(ERROR_BAD_USAGE, "rank 0: only %d of %d peers arrived at %s:%d within %.1f s (missing ranks %s)",
                           arrived, env->world - 1, env->master_addr, env->master_port,
                           timeout_ms / 1e3, missing);
            break;
        }
        int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) continue;
        uint32_t hello[4], reply[2] = {STATUS_OK, (uint32_t)env->world};
        if (io_all(fd, hello, sizeof hello, false, deadline) != 0 || hello[0] != MAGIC) {
            close(fd);  // not one of ours (a port scan, a stale peer): ignore it
            continue;
        }
        int peer_rank = (int)hello[1], peer_world = (int)hello[2];
        if (peer_world != env->world) reply[0] = STATUS_WORLD_MISMATCH;
        else if (peer_rank <= 0 || peer_rank >= env->world || peers[peer_rank] >= 0) reply[0] = STATUS_BAD_RANK;
        else if (hello[3] != size) reply[0] = STATUS_SIZE_MISMATCH;
        if (reply[0] != STATUS_OK) {
            (void)io_all(fd, reply, sizeof reply, true, deadline);
            close(fd);
            if (reply[0] == STATUS_WORLD_MISMATCH)
                rc = error_set(ERROR_BAD_USAGE, "rank 0: peer rank %d has WORLD_SIZE=%d, rank 0 has %d: the world size disagrees",
                               peer_rank, peer_world, env->world);
            else if (reply[0] == STATUS_BAD_RANK)
                rc = error_set(ERROR_BAD_USAGE, "rank 0: a peer claims rank %d, out of [1, %d) or taken twice",
                               peer_rank, env->world);
            else
                rc = error_set(ERROR_BAD_USAGE, "rank 0: peer rank %d expects a %u-byte id, rank 0 sends %zu (different builds?)",
                               peer_rank, hello[3], size);
            break;
        }
        peers[peer_rank] = fd;
        arrived++;
    }
    for (int r = 1; r < env->world; r++) {
        if (peers[r] < 0) continue;
        uint32_t reply[2] = {STATUS_OK, (uint32_t)env->world};
        if (rc == 0 && (io_all(peers[r], reply, sizeof reply, true, deadline) != 0 ||
                        io_all(peers[r], (void *)blob, size, true, deadline) != 0))
            rc = error_set(ERROR_IO, "rank 0: sending the id to rank %d failed: %s", r, strerror(errno));
        close(peers[r]);
    }
    close(listener);
    return rc;
}

// Every other rank: connect (retrying until rank 0 listens), say who we are, receive.
static int join(const DistEnv *env, void *blob, size_t size, int timeout_ms)
{
    struct sockaddr_storage addr;
    socklen_t addr_len;
    TRY(resolve(env, &addr, &addr_len));
    double deadline = now_ms() + timeout_ms;
    int fd = -1, last_errno = 0;
    while (fd < 0) {
        fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return error_set(ERROR_LIBRARY, "rank %d: socket: %s", env->rank, strerror(errno));
        if (connect(fd, (struct sockaddr *)&addr, addr_len) == 0) break;
        last_errno = errno;
        close(fd);
        fd = -1;
        if (now_ms() >= deadline)
            return error_set(ERROR_BAD_USAGE, "rank %d: no rank 0 listening at %s:%d within %.1f s (%s)", env->rank,
                             env->master_addr, env->master_port, timeout_ms / 1e3, strerror(last_errno));
        usleep(50 * 1000);
    }
    uint32_t hello[4] = {MAGIC, (uint32_t)env->rank, (uint32_t)env->world, (uint32_t)size}, reply[2];
    int rc = 0;
    if (io_all(fd, hello, sizeof hello, true, deadline) != 0 || io_all(fd, reply, sizeof reply, false, deadline) != 0)
        rc = error_set(ERROR_IO, "rank %d: rendezvous with rank 0 at %s:%d failed: %s", env->rank,
                       env->master_addr, env->master_port,
                       errno == ETIMEDOUT ? "timed out waiting for the other ranks" : strerror(errno));
    else if (reply[0] == STATUS_WORLD_MISMATCH)
        rc = error_set(ERROR_BAD_USAGE, "rank %d: WORLD_SIZE=%d disagrees with rank 0's %u", env->rank,
                       env->world, reply[1]);
    else if (reply[0] != STATUS_OK)
        rc = error_set(ERROR_BAD_USAGE, "rank %d: rank 0 rejected this rank (rank taken twice or id size differs)",
                       env->rank);
    else if (io_all(fd, blob, size, false, deadline) != 0)
        rc = error_set(ERROR_IO, "rank %d: receiving the id from rank 0 failed: %s", env->rank, strerror(errno));
    close(fd);
    return rc;
}

int dist_rendezvous_share(const DistEnv *env, void *blob, size_t size, int timeout_ms)
{
    if (env->world <= 1) return 0;
    if (env->world > MAX_WORLD) return error_set(ERROR_BAD_USAGE, "rank %d: world %d too large", env->rank, env->world);
    if (!env->master_addr[0])
        return error_set(ERROR_BAD_USAGE, "rank %d: MASTER_ADDR is not set: the rendezvous needs rank 0's host (e.g. MASTER_ADDR=127.0.0.1)",
                         env->rank);
    if (env->master_port <= 0)
        return error_set(ERROR_BAD_USAGE, "rank %d: MASTER_PORT is not set: the rendezvous needs a free TCP port (e.g. MASTER_PORT=29500)",
                         env->rank);
    if (timeout_ms <= 0) return error_set(ERROR_BAD_USAGE, "rank %d: rendezvous timeout must be > 0", env->rank);
    return env->rank == 0 ? serve(env, blob, size, timeout_ms) : join(env, blob, size, timeout_ms);
}
