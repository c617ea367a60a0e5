/*
 * Wake-up of a sleeping receiver (UCT events).
 *
 * Only a peer on the same host can signal, so events are enabled only for
 * pools that cannot span hosts (the emulated pool under /dev/shm) in hw
 * mode, unless UCX_CXL_EVENTS=y says all peers share a host.  The signal is a byte
 * written to a FIFO in /dev/shm named after the interface id: FIFOs work
 * across network and IPC namespaces, unlike the abstract UNIX sockets of
 * UCX's mm transports.
 *
 * The receiver holds an flock on its FIFO for as long as it lives; a FIFO
 * nobody holds locked belongs to a process that died, and the next
 * interface that opens removes it (flock works across all namespaces).
 *
 * Arm/signal is Dekker-style: the receiver stores armed = 1, full fence,
 * then looks for records; a sender stores a record's sequence number, full
 * fence, then reads armed.  One of the two always sees the other.  Both
 * meet in the caches of the one host all of them share, also in sw mode
 * (no events on the non-coherent emulator, whose processes are hosts of
 * their own).
 *
 * The sender's fence runs once per message and halved the message rate
 * (am_bw 8 B 11 against 23 M/s without events: 63% of the sender's time
 * in that MFENCE).  Where the kernel has membarrier(GLOBAL_EXPEDITED), the
 * fence moves to the side that sleeps, which arms rarely: a receiver that
 * could register announces it (block->events = UCT_CXL_EVENTS_MEMBARRIER),
 * and at arm, after armed = 1, calls membarrier(), which runs a full
 * barrier on every CPU that runs a thread of a registered process.  A
 * registered sender then only loads armed after its record: if its load
 * came before that barrier, its earlier record store was drained by it and
 * the receiver's look after the call sees the record; if after, it sees
 * armed = 1.  A sender that is not registered keeps its fence.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cxl_iface.h"

#include <ucs/debug/log.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define UCT_CXL_EVENT_DIR    "/dev/shm"
#define UCT_CXL_EVENT_PREFIX "ucx-cxl-ev-"

static void uct_cxl_event_path(uint64_t iface_id, char *buf, size_t len)
{
    snprintf(buf, len, UCT_CXL_EVENT_DIR "/" UCT_CXL_EVENT_PREFIX "%016" PRIx64,
             iface_id);
}

/* Remove FIFOs of dead interfaces: nobody holds their lock. */
static void uct_cxl_event_remove_stale(void)
{
    char path[300];
    struct dirent *de;
    DIR *dir;
    int fd;

    dir = opendir(UCT_CXL_EVENT_DIR);
    if (dir == NULL) {
        return;
    }
    while ((de = readdir(dir)) != NULL) {
        if (strncmp(de->d_name, UCT_CXL_EVENT_PREFIX,
                    strlen(UCT_CXL_EVENT_PREFIX)) ||
            (strchr(de->d_name, '.') != NULL)) { /* ".tmp": being created */
            continue;
        }
        snprintf(path, sizeof(path), UCT_CXL_EVENT_DIR "/%s", de->d_name);
        fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
            continue;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            ucs_debug("cxl: removing stale wake-up FIFO %s", path);
            unlink(path);
        }
        close(fd);
    }
    closedir(dir);
}

/* 1: this process is registered for membarrier(GLOBAL_EXPEDITED) */
int uct_cxl_membarrier_registered = 0;
static pthread_once_t uct_cxl_membarrier_once = PTHREAD_ONCE_INIT;

static int uct_cxl_membarrier(int cmd)
{
    return (int)syscall(__NR_membarrier, cmd, 0, 0);
}

/* Register this process (and issue one, to know a receiver can). */
static void uct_cxl_membarrier_register(void)
{
    int cmds = uct_cxl_membarrier(MEMBARRIER_CMD_QUERY);

    uct_cxl_membarrier_registered = 0;

    if ((cmds < 0) || !(cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) ||
        (uct_cxl_membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0) ||
        (uct_cxl_membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0)) {
        ucs_debug("cxl: no membarrier(GLOBAL_EXPEDITED): senders fence "
                  "before checking a receiver's wake-up flag");
        return;
    }
    uct_cxl_membarrier_registered = 1;
}

/* Once per process; a forked child is a new process (registration goes
 * with the address space), so it registers again. */
static void uct_cxl_membarrier_setup(void)
{
    uct_cxl_membarrier_register();
    pthread_atfork(NULL, NULL, uct_cxl_membarrier_register);
}

ucs_status_t uct_cxl_iface_event_init(uct_cxl_iface_t *iface, int mode)
{
    char tmp[80];
    /* sw mode says the peers are hosts that share no caches, and a
     * signal reaches only the own host: "try" means hw mode only */
    int enable = (mode == UCS_YES) ||
                 ((mode == UCS_TRY) && (iface->coh == CXL_COH_HW) &&
                  (iface->pool->backend == CXLPOOL_BACKEND_EMULATED));

    iface->event_fd  = -1;
    iface->event_wfd = -1;
    /* every interface registers: it may send to receivers that sleep */
    pthread_once(&uct_cxl_membarrier_once, uct_cxl_membarrier_setup);
    if (enable && (iface->pool->backend == CXLPOOL_BACKEND_EMULATE_NC)) {
        /* its processes are hosts of their own, with caches of their own:
         * the sender's check of "armed" relies on one host's caches */
        ucs_diag("cxl: no wake-up events on the non-coherent emulator %s "
                 "(UCX_CXL_EVENTS=y ignored)", iface->pool->path);
        enable = 0;
    }
    if (!enable) {
        return UCS_OK;
    }

    uct_cxl_event_remove_stale();

    /* create under a temporary name, lock, then publish: never unlocked */
    uct_cxl_event_path(iface->id, iface->event_path, sizeof(iface->event_path));
    snprintf(tmp, sizeof(tmp), "%s.tmp", iface->event_path);
    if (mkfifo(tmp, 0660) < 0) {
        ucs_error("cxl: mkfifo(%s) failed: %m", tmp);
        return UCS_ERR_IO_ERROR;
    }

    iface->event_fd = open(tmp, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (iface->event_fd >= 0) {
        iface->event_wfd = open(tmp, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    }
    if ((iface->event_fd < 0) || (iface->event_wfd < 0) ||
        (flock(iface->event_fd, LOCK_EX | LOCK_NB) < 0) ||
        (rename(tmp, iface->event_path) < 0)) {
        ucs_error("cxl: cannot set up wake-up FIFO %s: %m", iface->event_path);
        unlink(tmp);
        uct_cxl_iface_event_cleanup(iface);
        return UCS_ERR_IO_ERROR;
    }
    return UCS_OK;
}

void uct_cxl_iface_event_cleanup(uct_cxl_iface_t *iface)
{
    if (iface->event_fd >= 0) {
        close(iface->event_fd);
    }
    if (iface->event_wfd >= 0) {
        close(iface->event_wfd);
    }
    if ((iface->event_fd >= 0) || (iface->event_wfd >= 0)) {
        unlink(iface->event_path);
    }
    iface->event_fd = iface->event_wfd = -1;
}

ucs_status_t uct_cxl_iface_event_fd_get(uct_iface_h tl_iface, int *fd_p)
{
    uct_cxl_iface_t *iface = ucs_derived_of(tl_iface, uct_cxl_iface_t);

    if (iface->event_fd < 0) {
        return UCS_ERR_UNSUPPORTED;
    }
    *fd_p = iface->event_fd;
    return UCS_OK;
}

/* Is any record (or a new sender) waiting? */
static int uct_cxl_iface_has_rx(uct_cxl_iface_t *iface)
{
    uint64_t mask = iface->ring_mask;
    uct_cxl_chan_ctl_t *chan;
    uct_cxl_rec_t *rec;
    unsigned host, i, idx;

    uct_cxl_iface_poll_claims(iface);
    for (host = 0; host < iface->num_hosts; ++host) {
        for (i = 0; i < iface->active[host]; ++i) {
            idx  = host * iface->per_host + i;
            chan = uct_cxl_iface_chan(iface, idx);
            rec  = (uct_cxl_rec_t*)(uct_cxl_chan_ring(chan) +
                                    (iface->rx[idx].pos & mask));
            cxl_coh_invalidate(iface->coh, rec, UCT_CXL_LINE);
            if (uct_cxl_rec_valid(rec, iface->rx[idx].seq,
                                  iface->rx[idx].first)) {
                return 1;
            }
        }
    }
    return 0;
}

ucs_status_t uct_cxl_iface_event_arm(uct_iface_h tl_iface, unsigned events)
{
    uct_cxl_iface_t *iface = ucs_derived_of(tl_iface, uct_cxl_iface_t);
    char buf[64];
    ssize_t ret;
    int signaled = 0;

    if ((events & UCT_EVENT_SEND_COMP) &&
        !ucs_arbiter_is_empty(&iface->arbiter)) {
        return UCS_ERR_BUSY; /* queued sends: can not sleep */
    }
    if (!(events & UCT_EVENT_RECV)) {
        return UCS_OK;
    }
    if (iface->event_fd < 0) {
        return UCS_ERR_UNSUPPORTED;
    }

    while ((ret = read(iface->event_fd, buf, sizeof(buf))) > 0) {
        signaled = 1;
    }
    if ((ret < 0) && (errno != EAGAIN) && (errno != EINTR)) {
        ucs_error("cxl: read(%s) failed: %m", iface->event_path);
        return UCS_ERR_IO_ERROR;
    }
    if (signaled) {
        return UCS_ERR_BUSY;
    }

    iface->block->armed = 1;
    cxl_coh_writeback(iface->coh, iface->block, UCT_CXL_LINE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if ((iface->block->events == UCT_CXL_EVENTS_MEMBARRIER) &&
        (uct_cxl_membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0)) {
        /* senders skip their fence: without the barrier it can not sleep */
        ucs_error("cxl: membarrier(GLOBAL_EXPEDITED) failed: %m");
        iface->block->armed = 0;
        return UCS_ERR_BUSY;
    }
    if (uct_cxl_iface_has_rx(iface)) {
        iface->block->armed = 0;
        cxl_coh_writeback(iface->coh, iface->block, UCT_CXL_LINE);
        return UCS_ERR_BUSY;
    }
    return UCS_OK;
}

/*
 * A write to the FIFO of a peer that died fails with EPIPE and raises
 * SIGPIPE, which kills a program that did not ignore it (a broker's
 * reader did, when the broker was killed): the signal is blocked around
 * the write and, if the write raised it, taken back.
 */
static ssize_t uct_cxl_signal_write(int fd)
{
    struct timespec zero = {0, 0};
    sigset_t pipe_set, old, pending;
    char byte = 0;
    ssize_t n;
    int err, was_pending;

    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigpending(&pending);
    was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    n   = write(fd, &byte, 1);
    err = errno;
    if ((n < 0) && (err == EPIPE) && !was_pending) {
        while ((sigtimedwait(&pipe_set, NULL, &zero) < 0) && (errno == EINTR)) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = err;
    return n;
}

/*
 * The sender's half of the Dekker pair, right after the record's sequence
 * number store.  Events are enabled only where every peer shares the
 * receiver's host (uct_cxl_iface_event_init), so the two meet in that
 * host's coherent caches, also in sw mode: the fence orders the seq store
 * before the load of armed, and the cached header line is current (the
 * receiver's invalidate of the record line, in turn, fetches this host's
 * store).  Neither a write-back nor an invalidate is needed here.
 */
void uct_cxl_tx_signal_slow(uct_cxl_tx_t *tx)
{
    char path[64];

    if ((tx->peer->events == UCT_CXL_EVENTS_MEMBARRIER) &&
        uct_cxl_membarrier_registered) {
        /* the receiver's membarrier() at arm is the barrier (above) */
        asm volatile("" ::: "memory");
    } else {
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    }
    if (!tx->peer->armed) {
        return;
    }

    if (tx->signal_fd == -1) {
        uct_cxl_event_path(tx->peer_id, path, sizeof(path));
        tx->signal_fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (tx->signal_fd < 0) {
            /* the peer asked for signals it can not get: it would sleep
             * forever, so say so loudly */
            ucs_error("cxl: cannot signal peer interface 0x%" PRIx64 " via %s: "
                      "%m; is it on another host? (set UCX_CXL_EVENTS=n there)",
                      tx->peer_id, path);
            tx->signal_fd = -2;
        }
    }
    if ((tx->signal_fd >= 0) && (uct_cxl_signal_write(tx->signal_fd) < 0) &&
        (errno != EAGAIN)) {
        ucs_diag("cxl: signalling peer 0x%" PRIx64 " failed: %m", tx->peer_id);
    }
}
