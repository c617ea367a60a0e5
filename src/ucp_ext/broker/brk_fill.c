/*
 * Reader threads: each takes a chunk, reads its segments from the files
 * straight into the chunk's place in the arena (large sequential preads,
 * one per segment), computes its CRC32C and hands it back to the main
 * loop, which alone publishes it.  A file that changed since `add` (size
 * or mtime) fails the fill instead of mixing two versions in one chunk.
 */
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

static int brk_fill_open(brk_fill_job_t *job, uint32_t fi, int *fd,
                         uint32_t *cur)
{
    const brk_file_t *f = &job->vs->files[fi];
    const char *path    = job->vs->strings + f->path_off;
    char p[404];
    struct stat st;
    int64_t mtime;

    if (*cur == fi) {
        return 0;
    }
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
    snprintf(p, sizeof(p), "%.*s", (int)(f->path_len < 400 ? f->path_len : 400), path);
    *fd = open(p, O_RDONLY | O_CLOEXEC);
    if (*fd < 0) {
        snprintf(job->err, sizeof(job->err), "%s: %s", p, strerror(errno));
        return -1;
    }
    if (fstat(*fd, &st) != 0) {
        snprintf(job->err, sizeof(job->err), "%s: fstat: %s", p, strerror(errno));
        return -1;
    }
    mtime = (int64_t)st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
    if (((uint64_t)st.st_size != f->size) || (mtime != f->mtime_ns)) {
        snprintf(job->err, sizeof(job->err), "%s changed since it was added "
                 "(size %" PRIu64 " -> %lld): run cxl-broker add again", p,
                 f->size, (long long)st.st_size);
        return -1;
    }
    (void)posix_fadvise(*fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    *cur = fi;
    return 0;
}

static void brk_fill_one(brk_fill_t *fill, brk_fill_job_t *job)
{
    const brk_chunk_t *ch = &job->vs->chunks[job->chunk];
    const brk_seg_t *seg;
    uint32_t i, cur = UINT32_MAX;
    uint64_t done;
    double t0 = brk_now();
    ssize_t n;
    int fd = -1;

    job->status = CXL_BROKER_OK;
    for (i = 0; i < ch->nsegs; ++i) {
        seg = &job->vs->segs[ch->first_seg + i];
        if (brk_fill_open(job, seg->file, &fd, &cur)) {
            job->status = CXL_BROKER_ERR_IO;
            break;
        }
        for (done = 0; done < seg->len; done += (uint64_t)n) {
            n = pread(fd, job->dst + seg->chunk_off + done, seg->len - done,
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
    if (fd >= 0) {
        close(fd);
    }
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

int brk_fill_start(brk_fill_t *fill, unsigned nthreads, cxl_coh_mode_t coh)
{
    unsigned i;

    memset(fill, 0, sizeof(*fill));
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
