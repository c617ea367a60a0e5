/*
 * Progress of long work (warm): on a terminal one bar redrawn in place
 * with bytes, rate and ETA; otherwise a plain line every 10 percent.
 */
#include "cxl_broker.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

static double cxlb_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cxlb_progress_init(cxlb_progress_t *p, const char *what)
{
    p->what        = what;
    p->start       = cxlb_now();
    p->last        = 0;
    p->tty         = isatty(STDERR_FILENO);
    p->pct_printed = -1;
}

static void cxlb_progress_line(cxlb_progress_t *p, uint64_t done,
                               uint64_t total, int final)
{
    double el = cxlb_now() - p->start, rate = (el > 0) ? done / el : 0;
    double pct = total ? 100.0 * (double)done / (double)total : 100.0;
    char d[32], t[32], r[32], bar[31];
    int i, fill = (int)(pct * 30 / 100);

    cxlb_human(done, d, sizeof(d));
    cxlb_human(total, t, sizeof(t));
    cxlb_human((uint64_t)rate, r, sizeof(r));
    if (p->tty) {
        for (i = 0; i < 30; ++i) {
            bar[i] = (i < fill) ? '#' : '.';
        }
        bar[30] = '\0';
        fprintf(stderr, "\r%s [%s] %5.1f%% %s / %s  %s/s  ", p->what, bar, pct,
                d, t, r);
        if (!final && (rate > 0) && (done < total)) {
            fprintf(stderr, "ETA %.0fs ", (double)(total - done) / rate);
        } else {
            fprintf(stderr, "%.1fs     ", el);
        }
        if (final) {
            fputc('\n', stderr);
        }
    } else {
        fprintf(stderr, "%s: %.0f%% %s of %s, %s/s, %.1f s\n", p->what, pct, d,
                t, r, el);
    }
    fflush(stderr);
}

void cxlb_progress_update(cxlb_progress_t *p, uint64_t done, uint64_t total)
{
    int pct = total ? (int)(100 * done / total) : 100;

    if (p->tty) {
        if (cxlb_now() - p->last >= 0.1) {
            cxlb_progress_line(p, done, total, 0);
            p->last = cxlb_now();
        }
    } else if (pct / 10 != p->pct_printed / 10) {
        p->pct_printed = pct;
        if (pct < 100) {
            cxlb_progress_line(p, done, total, 0);
        }
    }
}

void cxlb_progress_end(cxlb_progress_t *p, uint64_t done, uint64_t total)
{
    cxlb_progress_line(p, done, total, 1);
}
