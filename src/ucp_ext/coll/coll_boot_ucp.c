/*
 * cxl_coll_ucp_bootstrap(): from nothing to an oob object for programs
 * without MPI.  Worker addresses meet at rank 0 through a TCP rendezvous
 * (rank 0 listens on HOST:PORT, every other rank connects and sends a
 * hello with its rank, size, tag prefix and worker address; rank 0 answers
 * with everybody's addresses, or with an error and its reason), then every
 * rank creates endpoints to all others (UCP_ERR_HANDLING_MODE_PEER) and
 * one allgather over them checks that they work.  The socket is used for
 * that one exchange only.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* accept4 */
#endif
#include "coll_ucp_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#define CXL_COLL_UCP_BOOT_MAGIC   0x43584232u   /* "CXB2": with instance */
#define CXL_COLL_UCP_ADDR_MAX     (1u << 20)    /* a worker address, bytes */
#define CXL_COLL_UCP_RETRY_US     50000         /* connect retry */
/* A rank sends its hello right after connect: a connection that has not
 * sent it by then is not one (a port scan, a stuck client), and rank 0
 * must not wait for it while the ranks queue behind it. */
#define CXL_COLL_UCP_HELLO_S      1.0

/* Network byte order on the wire; a hello is followed by the address. */
typedef struct {
    uint32_t magic;
    int32_t  rank;
    int32_t  size;
    uint32_t prefix;
    uint32_t addr_len;
} cxl_coll_ucp_hello_t;

/* The answer of rank 0: status 0, the object's instance and size (u32
 * length, address) pairs, or a status and msg_len bytes of reason. */
typedef struct {
    uint32_t magic;
    int32_t  status;
    uint32_t size;
    uint32_t msg_len;
    uint32_t instance;
} cxl_coll_ucp_reply_t;

typedef struct {
    const cxl_coll_ucp_params_t *params;
    int          rank;
    int          size;
    double       deadline;
    uint32_t     prefix;       /* tag prefix, the same on every rank */
    uint32_t     instance;     /* drawn by rank 0, sent in the answer */
    char         host[256];
    char         port[8];
    void        *my_addr;
    size_t       my_len;
    void       **addrs;        /* size entries, malloc'ed copies */
    uint32_t    *lens;
} cxl_coll_ucp_boot_t;

/* ---- sockets with a deadline ---- */

static int cxl_coll_ucp_poll(int fd, short events, double deadline)
{
    struct pollfd pfd = {.fd = fd, .events = events};
    double left;
    int rc;

    for (;;) {
        left = deadline - cxl_coll_ucp_now();
        if (left <= 0) {
            return 0;
        }
        rc = poll(&pfd, 1, (int)(left * 1000) + 1);
        if ((rc >= 0) || (errno != EINTR)) {
            return rc;
        }
    }
}

/*
 * connect() by the deadline: a blocking one to a host that drops SYNs (a
 * full backlog, a firewall) held the bootstrap for the kernel's ~127 s.
 * 0: connected; -1: failed (errno); -2: deadline.
 */
static int cxl_coll_ucp_connect_by(int fd, const struct sockaddr *sa,
                                   socklen_t salen, double deadline)
{
    int flags = fcntl(fd, F_GETFL), err = 0, rc;
    socklen_t elen = sizeof(err);

    if ((flags < 0) || (fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)) {
        return -1;
    }
    if (connect(fd, sa, salen) != 0) {
        if (errno != EINPROGRESS) {
            return -1;
        }
        rc = cxl_coll_ucp_poll(fd, POLLOUT, deadline);
        if (rc <= 0) {
            errno = (rc == 0) ? ETIMEDOUT : errno;
            return (rc == 0) ? -2 : -1;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) {
            return -1;
        }
        if (err != 0) {
            errno = err;
            return -1;
        }
    }
    /* send and recv poll with the deadline themselves */
    return (fcntl(fd, F_SETFL, flags) == 0) ? 0 : -1;
}

/* 0: done; -1: peer closed or error (errno); -2: deadline. */
static int cxl_coll_ucp_send_all(int fd, const void *buf, size_t len,
                                 double deadline)
{
    const uint8_t *p = buf;
    ssize_t n;
    int rc;

    while (len > 0) {
        rc = cxl_coll_ucp_poll(fd, POLLOUT, deadline);
        if (rc <= 0) {
            return (rc == 0) ? -2 : -1;
        }
        n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if ((errno == EINTR) || (errno == EAGAIN)) {
                continue;
            }
            return -1;
        }
        p   += n;
        len -= n;
    }
    return 0;
}

static int cxl_coll_ucp_recv_all(int fd, void *buf, size_t len,
                                 double deadline)
{
    uint8_t *p = buf;
    ssize_t n;
    int rc;

    while (len > 0) {
        rc = cxl_coll_ucp_poll(fd, POLLIN, deadline);
        if (rc <= 0) {
            return (rc == 0) ? -2 : -1;
        }
        n = recv(fd, p, len, MSG_DONTWAIT);
        if (n == 0) {
            errno = 0;
            return -1;
        }
        if (n < 0) {
            if ((errno == EINTR) || (errno == EAGAIN)) {
                continue;
            }
            return -1;
        }
        p   += n;
        len -= n;
    }
    return 0;
}

/* "HOST:PORT" or "[V6ADDR]:PORT" */
static cxl_coll_status_t cxl_coll_ucp_parse(cxl_coll_ucp_boot_t *b,
                                            const char *spec)
{
    const char *colon, *host = spec, *end;
    size_t hlen;
    char *e;
    long port;

    if (spec == NULL) {
        return cxl_coll_ucp_error(b->rank, CXL_COLL_ERR_INVAL, "bootstrap of "
                                  "%d ranks: no rendezvous (\"HOST:PORT\" "
                                  "where rank 0 listens)", b->size);
    }
    colon = strrchr(spec, ':');
    if (spec[0] == '[') {
        host  = spec + 1;
        end   = strchr(host, ']');
        /* the port follows the bracket: "[::1]:50:00" is no port 0 */
        colon = ((end == NULL) || (end[1] != ':')) ? NULL : end + 1;
    } else {
        end = colon;
    }
    /* digits only: strtol() would take " 9", "+9" and "-0" */
    port = ((colon != NULL) && (colon[1] >= '0') && (colon[1] <= '9')) ?
           strtol(colon + 1, &e, 10) : -1;
    if ((colon == NULL) || (end == NULL) || (end == host) || (port < 0) ||
        (*e != '\0') || (port > 65535) ||
        ((size_t)(end - host) >= sizeof(b->host))) {
        return cxl_coll_ucp_error(b->rank, CXL_COLL_ERR_INVAL, "rendezvous "
                                  "'%s': expected HOST:PORT or [ADDR]:PORT, "
                                  "port 0-65535", spec);
    }
    if ((port == 0) && (b->rank != 0)) {
        return cxl_coll_ucp_error(b->rank, CXL_COLL_ERR_INVAL, "rendezvous "
                                  "'%s': port 0 (any) is for rank 0 only; the "
                                  "others need the port it got", spec);
    }
    hlen = end - host;
    memcpy(b->host, host, hlen);
    b->host[hlen] = '\0';
    snprintf(b->port, sizeof(b->port), "%ld", port);
    return CXL_COLL_OK;
}

static cxl_coll_status_t cxl_coll_ucp_resolve(cxl_coll_ucp_boot_t *b,
                                              int passive,
                                              struct addrinfo **res)
{
    struct addrinfo hints;
    int rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family   = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags    = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
    rc = getaddrinfo(b->host, b->port, &hints, res);
    if (rc != 0) {
        return cxl_coll_ucp_error(b->rank, CXL_COLL_ERR_INVAL, "rendezvous "
                                  "host '%s': %s", b->host, gai_strerror(rc));
    }
    return CXL_COLL_OK;
}

/* ---- rank 0 ---- */

static int cxl_coll_ucp_listen(cxl_coll_ucp_boot_t *b)
{
    struct addrinfo *res, *ai;
    struct sockaddr_storage ss;
    socklen_t sslen = sizeof(ss);
    int fd = -1, one = 1, err = 0, port;

    if (cxl_coll_ucp_resolve(b, 1, &res) != CXL_COLL_OK) {
        return -1;
    }
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                    ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if ((bind(fd, ai->ai_addr, ai->ai_addrlen) == 0) &&
            (listen(fd, b->size) == 0)) {
            break;
        }
        err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        cxl_coll_ucp_error(0, CXL_COLL_ERR_OOB, "rendezvous: cannot listen "
                           "on %s:%s: %s", b->host, b->port, strerror(err));
        return -1;
    }
    if (getsockname(fd, (struct sockaddr*)&ss, &sslen) == 0) {
        port = ntohs((ss.ss_family == AF_INET6) ?
                     ((struct sockaddr_in6*)&ss)->sin6_port :
                     ((struct sockaddr_in*)&ss)->sin_port);
        snprintf(b->port, sizeof(b->port), "%d", port); /* PORT 0: the one got */
        if (b->params->listening != NULL) {
            b->params->listening(b->params->listening_arg, port);
        }
    }
    return fd;
}

/* Tell one connected rank that the bootstrap failed, and why. */
static void cxl_coll_ucp_reject(int fd, cxl_coll_status_t status,
                                const char *why)
{
    cxl_coll_ucp_reply_t rep;
    double deadline = cxl_coll_ucp_now() + 1.0;
    size_t len = strlen(why);

    rep.magic   = htonl(CXL_COLL_UCP_BOOT_MAGIC);
    rep.status  = (int32_t)htonl((uint32_t)status);
    rep.size     = 0;
    rep.msg_len  = htonl((uint32_t)len);
    rep.instance = 0;
    if (cxl_coll_ucp_send_all(fd, &rep, sizeof(rep), deadline) == 0) {
        cxl_coll_ucp_send_all(fd, why, len, deadline);
    }
}

/*
 * Read a hello from a fresh connection.  1: a rank (its address stored);
 * 0: not one of ours, dropped; < 0: a status that ends the bootstrap.
 */
static int cxl_coll_ucp_hello(cxl_coll_ucp_boot_t *b, int fd, int *conns)
{
    double until = cxl_coll_ucp_now() + CXL_COLL_UCP_HELLO_S;
    cxl_coll_ucp_hello_t h;
    char why[256];
    int rc, rank;

    until = (until < b->deadline) ? until : b->deadline;
    rc    = cxl_coll_ucp_recv_all(fd, &h, sizeof(h), until);
    if ((rc == -1) || ((rc == 0) && (ntohl(h.magic) != CXL_COLL_UCP_BOOT_MAGIC))) {
        return 0; /* closed at once, or a stranger */
    } else if (rc == -2) {
        /* silent for CXL_COLL_UCP_HELLO_S: dropped, unless the
         * bootstrap's own time is up */
        return (until < b->deadline) ? 0 : -CXL_COLL_ERR_TIMEOUT;
    }
    rank       = (int32_t)ntohl((uint32_t)h.rank);
    h.size     = (int32_t)ntohl((uint32_t)h.size);
    h.prefix   = ntohl(h.prefix);
    h.addr_len = ntohl(h.addr_len);
    if (h.size != b->size) {
        snprintf(why, sizeof(why), "rank %d says the job has %d ranks, rank 0 "
                 "says %d", rank, h.size, b->size);
    } else if ((rank <= 0) || (rank >= b->size)) {
        snprintf(why, sizeof(why), "a process claims rank %d of %d", rank,
                 b->size);
    } else if (conns[rank] >= 0) {
        snprintf(why, sizeof(why), "two processes claim rank %d", rank);
    } else if (h.prefix != b->prefix) {
        snprintf(why, sizeof(why), "rank %d uses tag prefix 0x%x, rank 0 "
                 "0x%x", rank, h.prefix, b->prefix);
    } else if ((h.addr_len == 0) || (h.addr_len > CXL_COLL_UCP_ADDR_MAX)) {
        snprintf(why, sizeof(why), "rank %d sent a worker address of %u "
                 "bytes", rank, h.addr_len);
    } else {
        why[0] = '\0';
    }
    if (why[0] != '\0') {
        cxl_coll_ucp_reject(fd, CXL_COLL_ERR_INVAL, why);
        cxl_coll_ucp_error(0, CXL_COLL_ERR_INVAL, "bootstrap: %s", why);
        return -CXL_COLL_ERR_INVAL;
    }
    b->addrs[rank] = malloc(h.addr_len);
    if (b->addrs[rank] == NULL) {
        cxl_coll_ucp_error(0, CXL_COLL_ERR_NO_MEMORY, "bootstrap: address of "
                           "rank %d (%u bytes)", rank, h.addr_len);
        return -CXL_COLL_ERR_NO_MEMORY;
    }
    b->lens[rank] = h.addr_len;
    rc = cxl_coll_ucp_recv_all(fd, b->addrs[rank], h.addr_len, until);
    if (rc != 0) {
        free(b->addrs[rank]);
        b->addrs[rank] = NULL;
        return ((rc == -2) && (until >= b->deadline)) ?
               -CXL_COLL_ERR_TIMEOUT : 0;
    }
    conns[rank] = fd;
    return 1;
}

/* "3, 4" of the ranks that have not connected */
static void cxl_coll_ucp_absent(const cxl_coll_ucp_boot_t *b, const int *conns,
                                char *buf, size_t len)
{
    size_t n = 0;
    int k, listed = 0;

    buf[0] = '\0';
    for (k = 1; (k < b->size) && (n < len); ++k) {
        if (conns[k] >= 0) {
            continue;
        }
        n += snprintf(buf + n, len - n, "%s%d", listed ? ", " : "", k);
        if (++listed == 8) {
            snprintf(buf + n, (n < len) ? len - n : 0, ", ...");
            break;
        }
    }
}

static cxl_coll_status_t cxl_coll_ucp_answer(cxl_coll_ucp_boot_t *b,
                                             const int *conns)
{
    cxl_coll_ucp_reply_t rep;
    uint32_t l;
    int k, j, rc = 0;

    rep.magic   = htonl(CXL_COLL_UCP_BOOT_MAGIC);
    rep.status  = 0;
    rep.size     = htonl((uint32_t)b->size);
    rep.msg_len  = 0;
    rep.instance = htonl(b->instance);
    for (k = 1; (k < b->size) && (rc == 0); ++k) {
        rc = cxl_coll_ucp_send_all(conns[k], &rep, sizeof(rep), b->deadline);
        for (j = 0; (j < b->size) && (rc == 0); ++j) {
            l  = htonl(b->lens[j]);
            rc = cxl_coll_ucp_send_all(conns[k], &l, sizeof(l), b->deadline);
            if (rc == 0) {
                rc = cxl_coll_ucp_send_all(conns[k], b->addrs[j], b->lens[j],
                                           b->deadline);
            }
        }
    }
    if (rc != 0) {
        return cxl_coll_ucp_error(0, (rc == -2) ? CXL_COLL_ERR_TIMEOUT :
                                  CXL_COLL_ERR_OOB, "bootstrap: sending the "
                                  "addresses to rank %d: %s", k - 1,
                                  (rc == -2) ? "timed out" :
                                  "it closed the connection");
    }
    return CXL_COLL_OK;
}

/*
 * The object's instance, 1..0xffff: another at every bootstrap, so that a
 * peer's late message of an earlier object's failed call (on the same
 * worker, with the same prefix: UCP keeps it queued) is never taken.
 */
static uint32_t cxl_coll_ucp_instance(void)
{
    static uint32_t count;
    uint32_t x = 0;

    if (getrandom(&x, sizeof(x), GRND_NONBLOCK) != (ssize_t)sizeof(x)) {
        x = (uint32_t)getpid() * 2654435761u ^
            (uint32_t)(cxl_coll_ucp_now() * 1e6);
    }
    x = (x + __atomic_add_fetch(&count, 1, __ATOMIC_RELAXED)) &
        CXL_COLL_UCP_SEQ_MASK;
    return x ? x : 1;
}

static cxl_coll_status_t cxl_coll_ucp_root(cxl_coll_ucp_boot_t *b)
{
    cxl_coll_status_t status = CXL_COLL_OK;
    int *conns, lfd, fd, got = 1, k, rc;
    char list[96], why[512];

    conns = malloc(b->size * sizeof(*conns));
    if (conns == NULL) {
        return cxl_coll_ucp_error(0, CXL_COLL_ERR_NO_MEMORY, "bootstrap of "
                                  "%d ranks", b->size);
    }
    for (k = 0; k < b->size; ++k) {
        conns[k] = -1;
    }
    lfd = cxl_coll_ucp_listen(b);
    if (lfd < 0) {
        free(conns);
        return CXL_COLL_ERR_OOB;
    }
    while ((got < b->size) && (status == CXL_COLL_OK)) {
        rc = cxl_coll_ucp_poll(lfd, POLLIN, b->deadline);
        if (rc == 0) {
            status = CXL_COLL_ERR_TIMEOUT;
            break;
        }
        fd = (rc > 0) ? accept4(lfd, NULL, NULL, SOCK_CLOEXEC) : -1;
        if (fd < 0) {
            if ((errno == EINTR) || (errno == ECONNABORTED)) {
                continue;
            }
            status = cxl_coll_ucp_error(0, CXL_COLL_ERR_OOB, "bootstrap: "
                                        "accept on %s:%s: %s", b->host,
                                        b->port, strerror(errno));
            break;
        }
        rc = cxl_coll_ucp_hello(b, fd, conns);
        if (rc == 1) {
            ++got;
        } else {
            close(fd);
            if (rc < 0) {
                status = (cxl_coll_status_t)-rc;
            }
        }
    }
    close(lfd);

    if (status == CXL_COLL_ERR_TIMEOUT) {
        cxl_coll_ucp_absent(b, conns, list, sizeof(list));
        snprintf(why, sizeof(why), "rank(s) %s of %d did not connect to "
                 "%s:%s within %.3g s", list, b->size, b->host, b->port,
                 b->params->timeout ? b->params->timeout :
                 CXL_COLL_UCP_TIMEOUT_DEFAULT);
        cxl_coll_ucp_error(0, status, "bootstrap: %s", why);
    } else if (status != CXL_COLL_OK) {
        snprintf(why, sizeof(why), "%s", cxl_coll_ucp_last_error());
    }
    if (status == CXL_COLL_OK) {
        b->instance = cxl_coll_ucp_instance();
        status      = cxl_coll_ucp_answer(b, conns);
    } else {
        for (k = 1; k < b->size; ++k) {
            if (conns[k] >= 0) {
                cxl_coll_ucp_reject(conns[k], status, why);
            }
        }
    }
    for (k = 1; k < b->size; ++k) {
        if (conns[k] >= 0) {
            close(conns[k]);
        }
    }
    free(conns);
    return status;
}

/* ---- the other ranks ---- */

static int cxl_coll_ucp_connect(cxl_coll_ucp_boot_t *b)
{
    struct addrinfo *res, *ai;
    int fd, err = 0, rc = -1;

    if (cxl_coll_ucp_resolve(b, 0, &res) != CXL_COLL_OK) {
        return -CXL_COLL_ERR_INVAL;
    }
    /* rank 0 may not listen yet: retry until the deadline */
    for (;;) {
        for (ai = res; ai != NULL; ai = ai->ai_next) {
            fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                        ai->ai_protocol);
            if (fd < 0) {
                err = errno;
                continue;
            }
            rc = cxl_coll_ucp_connect_by(fd, ai->ai_addr, ai->ai_addrlen,
                                         b->deadline);
            if (rc == 0) {
                freeaddrinfo(res);
                return fd;
            }
            err = errno;
            close(fd);
            if (rc == -2) {
                break;
            }
        }
        if ((rc == -2) ||
            (cxl_coll_ucp_now() + CXL_COLL_UCP_RETRY_US * 1e-6 > b->deadline)) {
            break;
        }
        usleep(CXL_COLL_UCP_RETRY_US);
    }
    freeaddrinfo(res);
    cxl_coll_ucp_error(b->rank, CXL_COLL_ERR_TIMEOUT, "bootstrap: cannot "
                       "connect to rank 0 at %s:%s within %.3g s: %s", b->host,
                       b->port, b->params->timeout ? b->params->timeout :
                       CXL_COLL_UCP_TIMEOUT_DEFAULT, strerror(err));
    return -CXL_COLL_ERR_TIMEOUT;
}

static cxl_coll_status_t cxl_coll_ucp_lost(cxl_coll_ucp_boot_t *b, int rc,
                                           const char *what)
{
    if (rc == -2) {
        return cxl_coll_ucp_error(b->rank, CXL_COLL_ERR_TIMEOUT, "bootstrap: "
                                  "no %s from rank 0 at %s:%s in time (ranks "
                                  "missing?)", what, b->host, b->port);
    }
    return cxl_coll_ucp_error(b->rank, CXL_COLL_ERR_OOB, "bootstrap: rank 0 "
                              "closed the rendezvous before the %s (%s)",
                              what, errno ? strerror(errno) :
                              "it failed or was stopped");
}

static cxl_coll_status_t cxl_coll_ucp_member(cxl_coll_ucp_boot_t *b)
{
    cxl_coll_status_t status = CXL_COLL_OK;
    cxl_coll_ucp_hello_t h;
    cxl_coll_ucp_reply_t rep;
    char why[256];
    uint32_t l;
    int fd, rc, k;

    fd = cxl_coll_ucp_connect(b);
    if (fd < 0) {
        return (cxl_coll_status_t)-fd;
    }
    h.magic    = htonl(CXL_COLL_UCP_BOOT_MAGIC);
    h.rank     = (int32_t)htonl((uint32_t)b->rank);
    h.size     = (int32_t)htonl((uint32_t)b->size);
    h.prefix   = htonl(b->prefix);
    h.addr_len = htonl((uint32_t)b->my_len);
    rc = cxl_coll_ucp_send_all(fd, &h, sizeof(h), b->deadline);
    if (rc == 0) {
        rc = cxl_coll_ucp_send_all(fd, b->my_addr, b->my_len, b->deadline);
    }
    if (rc == 0) {
        rc = cxl_coll_ucp_recv_all(fd, &rep, sizeof(rep), b->deadline);
    }
    if (rc != 0) {
        status = cxl_coll_ucp_lost(b, rc, "answer");
        goto out;
    }
    rep.status  = (int32_t)ntohl((uint32_t)rep.status);
    rep.msg_len = ntohl(rep.msg_len);
    b->instance = ntohl(rep.instance);
    if ((ntohl(rep.magic) != CXL_COLL_UCP_BOOT_MAGIC) ||
        ((rep.status == 0) && (ntohl(rep.size) != (uint32_t)b->size)) ||
        ((rep.status <= 0) && (rep.status != 0)) ||
        ((rep.status == 0) && ((b->instance == 0) ||
                               (b->instance > CXL_COLL_UCP_SEQ_MASK))) ||
        (rep.status >= CXL_COLL_ERR_LAST)) {
        status = cxl_coll_ucp_error(b->rank, CXL_COLL_ERR_OOB, "bootstrap: "
                                    "%s:%s answered something else than rank "
                                    "0 of this bootstrap", b->host, b->port);
        goto out;
    }
    if (rep.status != 0) {
        l = (rep.msg_len < sizeof(why)) ? rep.msg_len : sizeof(why) - 1;
        if (cxl_coll_ucp_recv_all(fd, why, l, b->deadline) != 0) {
            l = 0;
        }
        why[l] = '\0';
        status = cxl_coll_ucp_error(b->rank, (cxl_coll_status_t)rep.status,
                                    "bootstrap failed at rank 0: %s", why);
        goto out;
    }
    for (k = 0; k < b->size; ++k) {
        rc = cxl_coll_ucp_recv_all(fd, &l, sizeof(l), b->deadline);
        l  = ntohl(l);
        if ((rc == 0) && ((l == 0) || (l > CXL_COLL_UCP_ADDR_MAX))) {
            status = cxl_coll_ucp_error(b->rank, CXL_COLL_ERR_OOB, "bootstrap"
                                        ": rank 0 sent an address of %u bytes"
                                        " for rank %d", l, k);
            goto out;
        }
        if ((rc == 0) && ((b->addrs[k] = malloc(l)) == NULL)) {
            status = cxl_coll_ucp_error(b->rank, CXL_COLL_ERR_NO_MEMORY,
                                        "bootstrap: address of rank %d", k);
            goto out;
        }
        b->lens[k] = l;
        if (rc == 0) {
            rc = cxl_coll_ucp_recv_all(fd, b->addrs[k], l, b->deadline);
        }
        if (rc != 0) {
            status = cxl_coll_ucp_lost(b, rc, "addresses");
            goto out;
        }
    }
out:
    close(fd);
    return status;
}

/* ---- endpoints ---- */

static void cxl_coll_ucp_ep_failed(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    cxl_coll_ucp_peer_t *peer = arg;

    (void)ep;
    if (!peer->failed) {
        peer->status = status;
    }
    peer->failed = 1;
}

static cxl_coll_status_t cxl_coll_ucp_make_eps(cxl_coll_ucp_boot_t *b,
                                               cxl_coll_ucp_oob_t *oob)
{
    ucp_ep_params_t ep_params;
    ucs_status_t st;
    int k;

    oob->peers = calloc(b->size, sizeof(*oob->peers));
    if (oob->peers == NULL) {
        return cxl_coll_ucp_error(b->rank, CXL_COLL_ERR_NO_MEMORY, "bootstrap"
                                  ": endpoint table of %d ranks", b->size);
    }
    for (k = 0; k < b->size; ++k) {
        oob->peers[k].oob  = oob;
        oob->peers[k].rank = k;
        if (k == b->rank) {
            continue;
        }
        memset(&ep_params, 0, sizeof(ep_params));
        ep_params.field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                                    UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
        ep_params.address         = b->addrs[k];
        ep_params.err_mode        = UCP_ERR_HANDLING_MODE_PEER;
        ep_params.err_handler.cb  = cxl_coll_ucp_ep_failed;
        ep_params.err_handler.arg = &oob->peers[k];
        st = ucp_ep_create(b->params->worker, &ep_params, &oob->eps[k]);
        if (st != UCS_OK) {
            oob->eps[k] = NULL;
            return cxl_coll_ucp_error(b->rank, CXL_COLL_ERR_OOB, "bootstrap: "
                                      "endpoint to rank %d: %s (does UCX "
                                      "reach it with these UCX_TLS?)", k,
                                      ucs_status_string(st));
        }
    }
    return CXL_COLL_OK;
}

/* Every endpoint carries a message both ways, and all agree on who is who. */
static cxl_coll_status_t cxl_coll_ucp_check(cxl_coll_ucp_oob_t *oob)
{
    int32_t mine[2] = {oob->rank, oob->size}, *all;
    cxl_coll_status_t status = CXL_COLL_OK;
    int k, rc;

    all = malloc(2 * sizeof(*all) * oob->size);
    if (all == NULL) {
        return cxl_coll_ucp_error(oob->rank, CXL_COLL_ERR_NO_MEMORY,
                                  "bootstrap check");
    }
    rc = cxl_coll_ucp_allgather(oob, mine, all, sizeof(mine));
    if (rc != 0) {
        status = (cxl_coll_status_t)rc;
    }
    for (k = 0; (k < oob->size) && (status == CXL_COLL_OK); ++k) {
        if ((all[2 * k] != k) || (all[2 * k + 1] != oob->size)) {
            status = cxl_coll_ucp_error(oob->rank, CXL_COLL_ERR_OOB,
                                        "bootstrap check: the endpoint to "
                                        "rank %d reached rank %d of %d", k,
                                        all[2 * k], all[2 * k + 1]);
        }
    }
    free(all);
    return status;
}

cxl_coll_status_t cxl_coll_ucp_bootstrap(const cxl_coll_ucp_params_t *params,
                                         cxl_coll_ucp_oob_t **oob_p)
{
    cxl_coll_ucp_boot_t b;
    cxl_coll_ucp_oob_t *oob;
    cxl_coll_status_t status;
    ucs_status_t st;
    int k;

    if (oob_p != NULL) {
        *oob_p = NULL; /* on every failure */
    }
    status = cxl_coll_ucp_oob_alloc(params, oob_p ? &oob : NULL);
    if (status != CXL_COLL_OK) {
        return status;
    }
    memset(&b, 0, sizeof(b));
    b.params   = params;
    b.rank     = oob->rank;
    b.size     = oob->size;
    b.deadline = cxl_coll_ucp_now() + oob->timeout;
    b.prefix   = (uint32_t)(oob->prefix >> CXL_COLL_UCP_PFX_SHIFT);
    /* one rank needs no rendezvous; a given one is still checked */
    status = ((b.size > 1) || (params->rendezvous != NULL)) ?
             cxl_coll_ucp_parse(&b, params->rendezvous) : CXL_COLL_OK;
    if ((status != CXL_COLL_OK) || (b.size == 1)) {
        goto out_oob;
    }

    b.addrs = calloc(b.size, sizeof(*b.addrs));
    b.lens  = calloc(b.size, sizeof(*b.lens));
    if ((b.addrs == NULL) || (b.lens == NULL)) {
        status = cxl_coll_ucp_error(b.rank, CXL_COLL_ERR_NO_MEMORY,
                                    "bootstrap of %d ranks", b.size);
        goto out;
    }
    st = ucp_worker_get_address(params->worker, (ucp_address_t**)&b.my_addr,
                                &b.my_len);
    if (st != UCS_OK) {
        status = cxl_coll_ucp_error(b.rank, CXL_COLL_ERR_OOB, "bootstrap: "
                                    "ucp_worker_get_address: %s",
                                    ucs_status_string(st));
        goto out;
    }
    if (b.rank == 0) {
        b.addrs[0] = malloc(b.my_len);
        if (b.addrs[0] == NULL) {
            status = cxl_coll_ucp_error(0, CXL_COLL_ERR_NO_MEMORY,
                                        "bootstrap: own address");
            goto out;
        }
        memcpy(b.addrs[0], b.my_addr, b.my_len);
        b.lens[0] = (uint32_t)b.my_len;
        status    = cxl_coll_ucp_root(&b);
    } else {
        status = cxl_coll_ucp_member(&b);
    }
    if (status == CXL_COLL_OK) {
        oob->instance = (uint64_t)b.instance << CXL_COLL_UCP_INST_SHIFT;
        status        = cxl_coll_ucp_make_eps(&b, oob);
    }
    if (status == CXL_COLL_OK) {
        /* within the bootstrap's timeout, not one more of its own: a rank
         * stopped after its hello held the others up to twice as long */
        oob->deadline = b.deadline;
        status        = cxl_coll_ucp_check(oob);
        oob->deadline = 0;
    }

out:
    if (b.my_addr != NULL) {
        ucp_worker_release_address(params->worker, b.my_addr);
    }
    for (k = 0; (b.addrs != NULL) && (k < b.size); ++k) {
        free(b.addrs[k]);
    }
    free(b.addrs);
    free(b.lens);
out_oob:
    if (status != CXL_COLL_OK) {
        if (!oob->failed) {
            oob->failed = status; /* the endpoints are closed by force */
        }
        cxl_coll_ucp_oob_destroy(oob);
        oob = NULL;
    }
    *oob_p = oob;
    return status;
}
