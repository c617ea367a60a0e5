/*
 * vm_coll_pool - a collectives team of one rank whose caller names no pool
 * (pool_path NULL), held until SIGTERM or SIGINT, or SECONDS at most.
 * test/vm/guest-tests.sh runs it with UCX_CXL_POOL unset and looks for its
 * partition (cxl-coll:<pid in hex>:...) in `cxlpool info` of the device:
 * the team must be in the pool the transport's 'auto' attaches.
 * Prints "ready pid N" once the team exists and a barrier ran, "done"
 * after it is destroyed.  Usage: vm_coll_pool [SECONDS]  (default 60)
 * Exit: 0 ok, 1 the team failed.
 */
#include <ucx_cxl/coll.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int vcp_allgather(void *arg, const void *sbuf, void *rbuf, size_t len)
{
    (void)arg;
    memcpy(rbuf, sbuf, len); /* one rank */
    return 0;
}

int main(int argc, char **argv)
{
    struct timespec wait = {.tv_sec = (argc > 1) ? atoi(argv[1]) : 60};
    cxl_coll_team_params_t params;
    cxl_coll_team_t *team;
    sigset_t set;

    /* blocked before the team exists, so a signal that comes early waits */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);

    cxl_coll_team_params_init(&params);
    params.rank          = 0;
    params.size          = 1;
    params.oob_allgather = vcp_allgather;
    if (cxl_coll_team_create(&params, &team) != CXL_COLL_OK) {
        fprintf(stderr, "vm_coll_pool: team: %s\n", cxl_coll_last_error());
        return 1;
    }
    if (cxl_coll_barrier(team) != CXL_COLL_OK) {
        fprintf(stderr, "vm_coll_pool: barrier: %s\n", cxl_coll_last_error());
        cxl_coll_team_destroy(team);
        return 1;
    }
    printf("ready pid %d\n", (int)getpid());
    fflush(stdout);
    sigtimedwait(&set, NULL, &wait);
    cxl_coll_team_destroy(team);
    printf("done\n");
    return 0;
}
