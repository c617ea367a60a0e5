/*
 * Reader threads: each takes a chunk, reads its segments from the files
 * straight into the chunk's place in the arena (large sequential preads,
 * one per segment; O_DIRECT for the aligned part where the file system
 * takes it, so the device writes into the pool and the page cache keeps
 * no second copy), computes its CRC32C and hands it back to the main
 * loop, which alone publishes it.  A file that changed since `add` (size
 * or mtime) fails the fill instead of mixing two versions in one chunk.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE         /* O_DIRECT */
#endif
#include "brk_srv.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

/* The open files of one fill: buffered, and O_DIRECT where it works. */
typedef struct {
    uint32_t cur;               /* file index, UINT32_MAX: none */
    int      fd;
    int      dfd;               /* -1: no direct reads of this file */
} brk_fill_fds_t;

static void brk_fill_close(brk_fill_fds_t *f)
{
    if (f->fd >= 0) {
        close(f->fd);
    }
    if (f->dfd >= 0) {
        close(f->dfd);
    }
    f->fd  = -1;
    f->dfd = -1;
    f->cur = UINT32_MAX;
}

static int brk_fill_open(const brk_fill_t *fill, brk_fill_job_t *job,
                         uint32_t fi, brk_fill_fds_t *f)
{
    const brk_file_t *bf = &job->vs->files[fi];
    const char *path     = job->vs->strings + bf->path_off;
    char p[404];
    struct stat st, dst;
    int64_t mtime;

    if (f->cur == fi) {
        return 0;
    }
    brk_fill_close(f);
    snprintf(p, sizeof(p), "%.*s", (int)(bf->path_len < 400 ? bf->path_len : 400), path);
    f->fd = open(p, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) {
        snprintf(job->err, sizeof(job->err), "%s: %s", p, strerror(errno));
        return -1;
    }
    if (fstat(f->fd, &st) != 0) {
        snprintf(job->err, sizeof(job->err), "%s: fstat: %s", p, strerror(errno));
        return -1;
    }
    mtime = (int64_t)st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
    if (((uint64_t)st.st_size != bf->size) || (mtime != bf->mtime_ns)) {
        snprintf(job->err, sizeof(job->err), "%s changed since it was added "
                 "(size %" PRIu64 " -> %lld): run cxl-broker add again", p,
                 bf->size, (long long)st.st_size);
        return -1;
    }
    (void)posix_fadvise(f->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    if (fill->direct && (bf->size >= BRK_DIO_MIN)) {
        /* a file system without O_DIRECT refuses it here: buffered reads */
        f->dfd = open(p, O_RDONLY | O_CLOEXEC | O_DIRECT);
        if ((f->dfd >= 0) &&
            ((fstat(f->dfd, &dst) != 0) || (dst.st_ino != st.st_ino) ||
             (dst.st_dev != st.st_dev))) {
            close(f->dfd);      /* replaced between the opens: not ours */
            f->dfd = -1;
        }
    }
    f->cur = fi;
    return 0;
}

/*
 * The largest aligned head of [dst, dst + len) at file offset off read
 * with O_DIRECT: the device writes into the chunk's place in the pool, and
 * the file does not fill the page cache too (the pool holds the one copy).
 * Returns the bytes read; the caller reads the rest through the page cache.
 * A short or refused direct read ends direct reads of this file.
 */
static uint64_t brk_fill_direct(brk_fill_fds_t *f, uint8_t *dst, uint64_t len,
                                uint64_t off)
{
    uint64_t head, done = 0;
    ssize_t n;

    if ((f->dfd < 0) || (off % BRK_DIO_ALIGN) ||
        ((uintptr_t)dst % BRK_DIO_ALIGN)) {
        return 0;
    }
    head = len & ~(uint64_t)(BRK_DIO_ALIGN - 1);
    while (done < head) {
        n = pread(f->dfd, dst + done, head - done, (off_t)(off + done));
        if ((n < 0) && (errno == EINTR)) {
            continue;
        }
        if ((n <= 0) || ((uint64_t)n % BRK_DIO_ALIGN)) {
            if (n > 0) {
                done += (uint64_t)n;
            }
            close(f->dfd);
            f->dfd = -1;
            break;
        }
        done += (uint64_t)n;
    }
    return done;
}

static void brk_fill_one(brk_fill_t *fill, brk_fill_job_t *job)
{
    const brk_chunk_t *ch = &job->vs->chunks[job->chunk];
    brk_fill_fds_t f = {.cur = UINT32_MAX, .fd = -1, .dfd = -1};
    const brk_seg_t *seg;
    uint32_t i;
    uint64_t done;
    double t0 = brk_now();
    ssize_t n;

    job->status = CXL_BROKER_OK;
    for (i = 0; i < ch->nsegs; ++i) {
        seg = &job->vs->segs[ch->first_seg + i];
        if (brk_fill_open(fill, job, seg->file, &f)) {
            job->status = CXL_BROKER_ERR_IO;
            break;
        }
        done = brk_fill_direct(&f, job->dst + seg->chunk_off, seg->len,
                               seg->file_off);
        job->bytes_read   += done;
        job->direct_bytes += done;
        for (; done < seg->len; done += (uint64_t)n) {
            n = pread(f.fd, job->dst + seg->chunk_off + done, seg->len - done,
                      (off_t)(seg->file_off + done));
            if (n > 0) {
                job->bytes_read += (uint64_t)n;
                continue;
            }
            if ((n < 0) && (errno == EINTR)) {
                n = 0;
                continue;
            }
            snprintf(job->err, sizeof(job->err), "%.*s: %s at offset %" PRIu64,
                     (int)job->vs->files[seg->file].path_len,
                     job->vs->strings + job->vs->files[seg->file].path_off,
                     (n < 0) ? strerror(errno) : "truncated",
                     seg->file_off + done);
            job->status = CXL_BROKER_ERR_IO;
            break;
        }
        if (job->status != CXL_BROKER_OK) {
            break;
        }
    }
    brk_fill_close(&f);
    if (job->status == CXL_BROKER_OK) {
        job->crc = cxlpool_crc32c(0, job->dst, ch->len);
        cxl_coh_writeback(fill->coh, job->dst, ch->len);
        cxl_coh_fence(fill->coh);
    }
    job->seconds = brk_now() - t0;
}

static void *brk_fill_thread(void *arg)
{
    brk_fill_t *fill = arg;
    brk_fill_job_t *job;
    uint64_t one = 1;

    pthread_mutex_lock(&fill->lock);
    for (;;) {
        while (!fill->stop && (fill->todo == NULL)) {
            pthread_cond_wait(&fill->cond, &fill->lock);
        }
        if (fill->stop) {
            break;
        }
        job        = fill->todo;
        fill->todo = job->next;
        if (fill->todo == NULL) {
            fill->todo_tail = &fill->todo;
        }
        pthread_mutex_unlock(&fill->lock);
        brk_fill_one(fill, job);
        pthread_mutex_lock(&fill->lock);
        job->next  = fill->done;
        fill->done = job;
        if (write(fill->efd, &one, sizeof(one)) != sizeof(one)) {
            /* the counter is saturated: the main loop is awake anyway */
        }
    }
    pthread_mutex_unlock(&fill->lock);
    return NULL;
}

int brk_fill_start(brk_fill_t *fill, unsigned nthreads, cxl_coh_mode_t coh,
                   int direct)
{
    unsigned i;

    memset(fill, 0, sizeof(*fill));
    fill->direct    = direct;
    pthread_mutex_init(&fill->lock, NULL);
    pthread_cond_init(&fill->cond, NULL);
    fill->todo_tail = &fill->todo;
    fill->coh       = coh;
    fill->efd       = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    fill->threads   = calloc(nthreads, sizeof(*fill->threads));
    if ((fill->efd < 0) || (fill->threads == NULL)) {
        return -1;
    }
    for (i = 0; i < nthreads; ++i) {
        if (pthread_create(&fill->threads[i], NULL, brk_fill_thread, fill)) {
            break;
        }
        fill->nthreads++;
    }
    return fill->nthreads ? 0 : -1;
}

void brk_fill_stop(brk_fill_t *fill)
{
    brk_fill_job_t *job;
    unsigned i;

    pthread_mutex_lock(&fill->lock);
    fill->stop = 1;
    pthread_cond_broadcast(&fill->cond);
    pthread_mutex_unlock(&fill->lock);
    for (i = 0; i < fill->nthreads; ++i) {
        pthread_join(fill->threads[i], NULL);
    }
    while ((job = fill->todo) != NULL) {
        fill->todo = job->next;
        free(job);
    }
    while ((job = fill->done) != NULL) {
        fill->done = job->next;
        free(job);
    }
    free(fill->threads);
    if (fill->efd >= 0) {
        close(fill->efd);
    }
    pthread_mutex_destroy(&fill->lock);
    pthread_cond_destroy(&fill->cond);
}

void brk_fill_post(brk_fill_t *fill, brk_fill_job_t *job)
{
    job->next = NULL;
    pthread_mutex_lock(&fill->lock);
    *fill->todo_tail = job;
    fill->todo_tail  = &job->next;
    pthread_cond_signal(&fill->cond);
    pthread_mutex_unlock(&fill->lock);
}

brk_fill_job_t *brk_fill_collect(brk_fill_t *fill)
{
    brk_fill_job_t *jobs;
    uint64_t cnt;

    if (read(fill->efd, &cnt, sizeof(cnt)) < 0) {
        /* EAGAIN: nothing signalled, the list may still hold jobs */
    }
    pthread_mutex_lock(&fill->lock);
    jobs       = fill->done;
    fill->done = NULL;
    pthread_mutex_unlock(&fill->lock);
    return jobs;
}
