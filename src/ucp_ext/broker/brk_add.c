/*
 * `cxl-broker add`: the scan of a dataset's files runs on a thread of its
 * own, so readers keep being served while a large directory is indexed;
 * the main loop publishes the result (brk_vs_publish) and answers.
 */
#include "brk_srv.h"
#include "brk_wire.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *brk_add_thread(void *arg)
{
    brk_add_job_t *job = arg;
    brk_scan_opts_t opts;
    uint64_t one = 1;

    memset(&opts, 0, sizeof(opts));
    opts.format      = (brk_format_t)job->req.format;
    opts.chunk_size  = job->req.chunk_size;
    opts.record_size = job->req.record_size;
    job->rc = brk_scan((const char *const*)job->paths, job->npaths, &opts,
                       &job->desc, job->err, sizeof(job->err));
    __atomic_store_n(&job->finished, 1, __ATOMIC_RELEASE);
    if (write(job->efd, &one, sizeof(one)) != sizeof(one)) {
        /* saturated: the main loop is awake anyway */
    }
    return NULL;
}

static void brk_add_free(brk_add_job_t *job)
{
    unsigned i;

    for (i = 0; i < job->npaths; ++i) {
        free(job->paths[i]);
    }
    free(job->paths);
    brk_desc_free(&job->desc);
    free(job);
}

/* req: decoded (brk_wire.h): name, format, policy and paths are checked */
void brk_add_start(brk_srv_t *srv, brk_conn_t *conn, uint64_t req_id,
                   const brk_req_t *req)
{
    brk_add_job_t *job;
    const char *path;
    size_t pos = 0;
    unsigned i;

    for (job = srv->adds; job != NULL; job = job->next) {
        if (!strcmp(job->req.name, req->name)) {
            brk_reply_error(srv, conn, req_id, BRK_REQ_ADD, CXL_BROKER_ERR_BUSY,
                            "dataset '%s' is being added already", req->name);
            return;
        }
    }
    job = calloc(1, sizeof(*job));
    if ((job == NULL) ||
        ((job->paths = calloc(req->u.add.npaths, sizeof(char*))) == NULL)) {
        free(job);
        brk_reply_error(srv, conn, req_id, BRK_REQ_ADD, CXL_BROKER_ERR_NO_MEMORY,
                        "out of memory");
        return;
    }
    job->conn   = conn;
    job->req_id = req_id;
    job->req    = req->u.add;
    job->efd    = srv->add_efd;
    memcpy(job->req.name, req->name, sizeof(job->req.name));
    for (i = 0; i < req->u.add.npaths; ++i) {
        path = brk_req_next_path(req, &pos);
        if ((path == NULL) || ((job->paths[i] = strdup(path)) == NULL)) {
            job->npaths = i;
            brk_add_free(job);
            brk_reply_error(srv, conn, req_id, BRK_REQ_ADD,
                            CXL_BROKER_ERR_NO_MEMORY, "out of memory");
            return;
        }
    }
    job->npaths = req->u.add.npaths;
    if (pthread_create(&job->thread, NULL, brk_add_thread, job)) {
        brk_add_free(job);
        brk_reply_error(srv, conn, req_id, BRK_REQ_ADD, CXL_BROKER_ERR_NO_MEMORY,
                        "cannot start a scan thread");
        return;
    }
    job->next = srv->adds;
    srv->adds = job;
}

static void brk_add_publish(brk_srv_t *srv, brk_add_job_t *job)
{
    cxl_broker_dsinfo_t info;
    char err[BRK_ERRMSG_MAX] = "";
    brk_vs_t *vs;
    uint32_t before;
    int rc;

    if (job->rc != 0) {
        if (job->conn != NULL) {
            brk_reply_error(srv, job->conn, job->req_id, BRK_REQ_ADD,
                            CXL_BROKER_ERR_IO, "%s", job->err);
        }
        return;
    }
    vs     = brk_vs_find(srv, job->req.name, 0);
    before = vs ? vs->rec.version : 0;
    rc = brk_vs_publish(srv, job->req.name, &job->req, &job->desc, &vs,
                        err, sizeof(err));
    if (rc != CXL_BROKER_OK) {
        if (job->conn != NULL) {
            brk_reply_error(srv, job->conn, job->req_id, BRK_REQ_ADD, rc,
                            "%s", err);
        }
        return;
    }
    if (vs->rec.version != before) {
        brk_log(srv, "%s v%u: %" PRIu64 " samples in %" PRIu64 " chunks, %"
                PRIu64 " files, %" PRIu64 " MiB (%s, %s)", vs->rec.name,
                vs->rec.version, vs->rec.nsamples, vs->rec.nchunks,
                vs->rec.nfiles, vs->rec.bytes >> 20,
                brk_format_name(vs->rec.format),
                brk_policy_name(vs->rec.policy));
    }
    if (job->conn != NULL) {
        memset(&info, 0, sizeof(info));
        snprintf(info.name, sizeof(info.name), "%s", vs->rec.name);
        info.version    = vs->rec.version;
        info.format     = vs->rec.format;
        info.policy     = vs->rec.policy;
        info.active     = 1;
        info.nsamples   = vs->rec.nsamples;
        info.nchunks    = vs->rec.nchunks;
        info.nfiles     = vs->rec.nfiles;
        info.bytes      = vs->rec.bytes;
        info.chunk_size = vs->rec.chunk_size;
        info.resident_chunks = vs->resident_chunks;
        info.resident_bytes  = vs->resident_bytes;
        info.readers    = vs->nhandles;
        /* epoch field: 1 when this add published a new version */
        info.epoch      = vs->rec.version != before;
        brk_reply(srv, job->conn, job->req_id, BRK_REQ_ADD, CXL_BROKER_OK,
                  &info, sizeof(info));
    }
}

void brk_add_finish(brk_srv_t *srv)
{
    brk_add_job_t **pp = &srv->adds, *job;

    while ((job = *pp) != NULL) {
        if (!__atomic_load_n(&job->finished, __ATOMIC_ACQUIRE) && !srv->stop) {
            pp = &job->next;
            continue;
        }
        pthread_join(job->thread, NULL);
        *pp = job->next;
        if (!srv->stop) {
            brk_add_publish(srv, job);
        }
        brk_add_free(job);
    }
}
