/*
 * cxl-broker: the command-line front of the dataset-chunk broker.
 */
#ifndef CXL_BROKER_TOOL_H
#define CXL_BROKER_TOOL_H

#include "brk_srv.h"

#include <ucx_cxl/broker.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    const char *broker;         /* --broker HOST:PORT */
    int         json;
} cxlb_common_t;

int  cxlb_serve(int argc, char **argv);
int  cxlb_add(int argc, char **argv);
int  cxlb_ls(int argc, char **argv);
int  cxlb_warm(int argc, char **argv);
int  cxlb_stat(int argc, char **argv);
int  cxlb_evict(int argc, char **argv);
int  cxlb_rm(int argc, char **argv);
int  cxlb_destroy(int argc, char **argv);

/* one-line error on stderr, returns the exit status 1 */
int  cxlb_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int  cxlb_connect(const cxlb_common_t *c, cxl_broker_t **b);
int  cxlb_size(const char *opt, const char *arg, uint64_t *size);

/* serve's options into prm (zeroed first): 0, CXLB_OPTS_HELP for --help,
 * or the exit status (1: a bad value, said on stderr; 2: usage) */
#define CXLB_OPTS_HELP 3
int  cxlb_serve_opts(int argc, char **argv, brk_serve_params_t *prm);
void cxlb_human(uint64_t bytes, char *buf, size_t len);
void cxlb_json_str(FILE *f, const char *s);

/* progress of long work: a bar on a terminal, lines otherwise */
typedef struct {
    const char *what;
    double      start, last;
    int         tty;
    int         pct_printed;
} cxlb_progress_t;

void cxlb_progress_init(cxlb_progress_t *p, const char *what);
void cxlb_progress_update(cxlb_progress_t *p, uint64_t done, uint64_t total);
void cxlb_progress_end(cxlb_progress_t *p, uint64_t done, uint64_t total);

#endif
