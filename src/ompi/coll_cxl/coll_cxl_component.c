/*
 * coll/cxl component: MCA parameters (coll_cxl_*), MPI_T counters and the
 * verbose stream.  See coll_cxl.h.
 */
#include "coll_cxl.h"

#include "opal/mca/base/mca_base_pvar.h"
#include "opal/util/output.h"

#include <string.h>

static const char *coll_cxl_names[COLL_CXL_LAST] = {
    [COLL_CXL_BARRIER]              = "barrier",
    [COLL_CXL_BCAST]                = "bcast",
    [COLL_CXL_REDUCE]               = "reduce",
    [COLL_CXL_ALLREDUCE]            = "allreduce",
    [COLL_CXL_GATHER]               = "gather",
    [COLL_CXL_SCATTER]              = "scatter",
    [COLL_CXL_ALLGATHER]            = "allgather",
    [COLL_CXL_REDUCE_SCATTER_BLOCK] = "reduce_scatter_block",
    [COLL_CXL_ALLTOALL]             = "alltoall",
};

static int coll_cxl_register(void);
static int coll_cxl_open(void);
static int coll_cxl_close(void);

mca_coll_cxl_component_t mca_coll_cxl_component = {
    .super = {
        .collm_version = {
            MCA_COLL_BASE_VERSION_2_0_0,
            .mca_component_name = "cxl",
            MCA_BASE_MAKE_VERSION(component, OMPI_MAJOR_VERSION,
                                  OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION),
            .mca_open_component            = coll_cxl_open,
            .mca_close_component           = coll_cxl_close,
            .mca_register_component_params = coll_cxl_register,
        },
        .collm_data = {
            /* no checkpoint/restart */
            MCA_BASE_METADATA_PARAM_NONE
        },
        .collm_init_query = mca_coll_cxl_init_query,
        .collm_comm_query = mca_coll_cxl_comm_query,
    },
    .priority          = 40,
    .enable            = true,
    .verbose           = 0,
    .output            = -1,
    .min_ranks         = 2,
    .collectives       = NULL,
    .pool              = NULL,
    .region_size       = 0,
    .progress_interval = 256,
    .spin_count        = 1000,
    .nonblocking       = true,
    .nb_team           = true,
    .cid_prev          = true,
};

const char *mca_coll_cxl_coll_name(mca_coll_cxl_coll_t coll)
{
    return (coll < COLL_CXL_LAST) ? coll_cxl_names[coll] : "?";
}

/* "all" or a comma-separated list of names; an unknown name is reported
 * (every rank parses the same string, so all decide alike) */
static unsigned coll_cxl_parse_colls(const char *list)
{
    unsigned mask = 0;
    char *copy, *tok, *save = NULL;
    int i;

    if ((list == NULL) || (strcmp(list, "all") == 0)) {
        return (1u << COLL_CXL_LAST) - 1;
    }
    copy = strdup(list);
    if (copy == NULL) {
        return 0;
    }
    for (tok = strtok_r(copy, ", ", &save); tok != NULL;
         tok = strtok_r(NULL, ", ", &save)) {
        for (i = 0; i < COLL_CXL_LAST; ++i) {
            if (strcmp(tok, coll_cxl_names[i]) == 0) {
                mask |= 1u << i;
                break;
            }
        }
        if (i == COLL_CXL_LAST) {
            opal_output(0, "coll:cxl: coll_cxl_collectives: unknown collective "
                        "'%s' ignored (known: barrier, bcast, reduce, allreduce, "
                        "gather, scatter, allgather, reduce_scatter_block, "
                        "alltoall, or all)", tok);
        }
    }
    free(copy);
    return mask;
}

static void coll_cxl_var(const char *name, const char *help,
                         mca_base_var_type_t type, void *storage)
{
    (void)mca_base_component_var_register(
            &mca_coll_cxl_component.super.collm_version, name, help, type,
            NULL, 0, 0, OPAL_INFO_LVL_9, MCA_BASE_VAR_SCOPE_READONLY,
            storage);
}

/* counters: an MPI_T handle reads them relative to its allocation;
 * levels: the current value */
static void coll_cxl_pvar(const char *name, const char *help, int var_class,
                          unsigned long long *counter)
{
    (void)mca_base_component_pvar_register(
            &mca_coll_cxl_component.super.collm_version, name, help,
            OPAL_INFO_LVL_9, var_class,
            MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL, MCA_BASE_VAR_BIND_NO_OBJECT,
            MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS,
            NULL, NULL, NULL, counter);
}

static int coll_cxl_register(void)
{
    mca_coll_cxl_component_t *c = &mca_coll_cxl_component;

    coll_cxl_var("priority",
                 "Priority of coll/cxl on the communicators it accepts "
                 "(coll/tuned has 30, coll/self 75: above 30 it replaces "
                 "tuned; above 75 it also takes single-rank communicators "
                 "such as MPI_COMM_SELF, if coll_cxl_min_ranks is 1)",
                 MCA_BASE_VAR_TYPE_INT, &c->priority);
    coll_cxl_var("enable",
                 "Whether coll/cxl offers itself at all (false: never "
                 "selected, as with --mca coll ^cxl)",
                 MCA_BASE_VAR_TYPE_BOOL, &c->enable);
    coll_cxl_var("verbose",
                 "Verbosity: 1 why each communicator was accepted or "
                 "declined, 10 also each call handed to the previous module "
                 "and why, 20 also each call run by the library",
                 MCA_BASE_VAR_TYPE_INT, &c->verbose);
    coll_cxl_var("min_ranks",
                 "Smallest communicator coll/cxl accepts (1 also takes "
                 "single-rank communicators; they need a priority above "
                 "coll/self's 75 to be used)",
                 MCA_BASE_VAR_TYPE_INT, &c->min_ranks);
    c->collectives = "all";
    coll_cxl_var("collectives",
                 "Collectives coll/cxl takes: \"all\" or a comma-separated "
                 "list of barrier, bcast, reduce, allreduce, gather, "
                 "scatter, allgather, reduce_scatter_block, alltoall; the "
                 "others stay with the previous module",
                 MCA_BASE_VAR_TYPE_STRING, &c->collectives);
    c->pool = "";
    coll_cxl_var("pool",
                 "CXL pool the teams use (a path or emulate-nc:PATH); empty: "
                 "the library's choice (CXL_COLL_POOL, else the pool the "
                 "cxl transport attaches first: the first of UCX_CXL_POOL, "
                 "else a devdax device holding a pool, else the per-user "
                 "default pool)",
                 MCA_BASE_VAR_TYPE_STRING, &c->pool);
    coll_cxl_var("region_size",
                 "Bytes of pool memory each rank owns for one communicator's "
                 "team; 0: the library's configuration "
                 "(CXL_COLL_REGION_SIZE)",
                 MCA_BASE_VAR_TYPE_SIZE_T, &c->region_size);
    coll_cxl_var("progress_interval",
                 "While waiting for a collective: polls of the library between "
                 "two calls of Open MPI's progress engine (which keeps "
                 "outstanding point-to-point requests and the one-sided "
                 "operations this rank serves moving) while it spins "
                 "(coll_cxl_spin_count); at least 1. A call costs about as "
                 "much as a short collective, so a wait that ends within the "
                 "interval makes none. After the spin, every yield of the "
                 "CPU is preceded by a call",
                 MCA_BASE_VAR_TYPE_INT, &c->progress_interval);
    coll_cxl_var("spin_count",
                 "While waiting for a collective: polls before every further "
                 "poll also yields the CPU (sched_yield), so that ranks "
                 "sharing a core with the awaited one let it run; 0: yield "
                 "at once",
                 MCA_BASE_VAR_TYPE_INT, &c->spin_count);
    coll_cxl_var("nonblocking",
                 "Whether coll/cxl also takes the non-blocking forms "
                 "(MPI_Ibarrier, MPI_Ibcast, ... of the collectives in "
                 "coll_cxl_collectives); false: they stay with the previous "
                 "module (libnbc)",
                 MCA_BASE_VAR_TYPE_BOOL, &c->nonblocking);
    coll_cxl_var("nb_team",
                 "Whether a communicator's first non-blocking collective "
                 "makes its team: the creation starts without waiting "
                 "(its exchange runs over point-to-point messages while the "
                 "program goes on) and the communicator's non-blocking "
                 "calls are held until it ends, then run in the library "
                 "(the previous module's if the creation failed); false: "
                 "the team is made at the first blocking collective and "
                 "non-blocking calls before it go to the previous module",
                 MCA_BASE_VAR_TYPE_BOOL, &c->nb_team);
    coll_cxl_var("cid_prev",
                 "Whether non-blocking allreduces of one MPI_INT with "
                 "MPI_MAX or MPI_MIN go to the previous module (libnbc): "
                 "Open MPI's communicator constructors agree on a context "
                 "id with such calls on the parent, and MPI_Comm_idup "
                 "starts them from the progress engine at moments that "
                 "differ between ranks, so in the team they would pair with "
                 "the program's own collectives on the parent (the call "
                 "fails: the ranks' calls differ); false: the team takes "
                 "them (only for programs that never call MPI_Comm_idup)",
                 MCA_BASE_VAR_TYPE_BOOL, &c->cid_prev);

    coll_cxl_pvar("teams", "Communicators of this process coll/cxl runs on "
                  "now (library teams alive)", MCA_BASE_PVAR_CLASS_LEVEL,
                  &c->n_teams);
    coll_cxl_pvar("calls", "Collective calls of this process run by "
                  "the CXL collectives library", MCA_BASE_PVAR_CLASS_COUNTER,
                  &c->n_calls);
    coll_cxl_pvar("nb_calls", "Non-blocking collective calls of this "
                  "process run by the CXL collectives library (also counted "
                  "in coll_cxl_calls)", MCA_BASE_PVAR_CLASS_COUNTER,
                  &c->n_nb_calls);
    coll_cxl_pvar("nb_teams", "Teams of this process made at a "
                  "non-blocking collective, without waiting (also counted "
                  "in coll_cxl_teams while alive)",
                  MCA_BASE_PVAR_CLASS_COUNTER, &c->n_nb_teams);
    coll_cxl_pvar("fallbacks", "Collective calls of this process that "
                  "coll/cxl handed to the module it replaced (datatype, "
                  "operation or form it does not take)",
                  MCA_BASE_PVAR_CLASS_COUNTER, &c->n_fallbacks);
    coll_cxl_pvar("errors", "Collective calls of this process that the "
                  "library failed (peer died, timeout, no memory...)",
                  MCA_BASE_PVAR_CLASS_COUNTER, &c->n_errors);
    return OMPI_SUCCESS;
}

static int coll_cxl_open(void)
{
    mca_coll_cxl_component_t *c = &mca_coll_cxl_component;

    c->output = opal_output_open(NULL);
    opal_output_set_verbosity(c->output, c->verbose);
    c->colls = coll_cxl_parse_colls(c->collectives);
    if (c->progress_interval < 1) {
        c->progress_interval = 1;
    }
    if (c->spin_count < 0) {
        c->spin_count = 0;
    }
    OBJ_CONSTRUCT(&c->nb_lock, opal_mutex_t);
    c->nb_head   = NULL;
    c->nb_tail   = &c->nb_head;
    c->nb_active = 0;
    c->nb_busy   = 0;
    OBJ_CONSTRUCT(&c->hold_lock, opal_mutex_t);
    c->hold_head   = NULL;
    c->hold_tail   = &c->hold_head;
    c->hold_active = 0;
    c->hold_busy   = 0;
    return OMPI_SUCCESS;
}

static int coll_cxl_close(void)
{
    mca_coll_cxl_hold_fini();
    mca_coll_cxl_nb_fini();
    OBJ_DESTRUCT(&mca_coll_cxl_component.hold_lock);
    OBJ_DESTRUCT(&mca_coll_cxl_component.nb_lock);
    if (mca_coll_cxl_component.output >= 0) {
        opal_output_close(mca_coll_cxl_component.output);
        mca_coll_cxl_component.output = -1;
    }
    return OMPI_SUCCESS;
}
