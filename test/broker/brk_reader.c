/*
 * brk_reader: the broker tests' reader process (the scripts in test/broker).
 *
 *   brk_reader [OPTIONS] NAME      read every sample of dataset NAME
 *   brk_reader --gen DIR N SIZE TAG  write N files of SIZE bytes whose
 *                                  contents are a pattern of TAG
 *
 * Reading prints "brk_reader: samples N bytes B digest D errors E"; the
 * digest is the CRC32C of the per-sample CRC32Cs in index order, so
 * readers in any order agree when they got the same bytes.
 *   --broker A  --version V  --epochs E  --order seq|random  --seed S
 *   --announce  tell the broker each epoch's order (plan policy)
 *   --batch K   read K samples per cxl_broker_read_batch()
 *   --count N   read only the first N samples of each epoch's order
 *   --check     compare every sample with its bytes in the files
 *   --pattern   check every sample is one TAG's pattern entirely
 *   --view      zero-copy views instead of reads (local readers)
 *   --hold S    after reading, keep views of every sample S seconds
 *   --loop S    read again and again for S seconds
 *   --local 0|1 never / must map the broker's pool
 *   --expect-error  succeed only if a read fails; prints the seconds
 *   --scribble FIELD:I  after opening (local readers), write garbage into
 *               the pool-resident index as any process of the pool could:
 *               FIELD sample-chunk, sample-file, sample-off, sample-len
 *               (of sample I), seg-len (of segment I: what the broker
 *               fills by), chunk-resident (chunk I's state word says
 *               RESIDENT) or vrec-nchunks (of the dataset's version
 *               record; I ignored), then reads as asked
 */
#include "brk_client_int.h"

#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint32_t rd_word(uint32_t tag, uint64_t k)
{
    uint64_t x = ((uint64_t)tag << 32) ^ (k * 0x9e3779b97f4a7c15ull);

    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    return (uint32_t)x;
}

static int rd_gen(const char *dir, unsigned n, size_t size, uint32_t tag)
{
    char path[4096];
    uint32_t *buf;
    size_t k, words = (size + 3) / 4;
    unsigned i;
    FILE *f;

    buf = malloc(words * 4 + 4);
    if (buf == NULL) {
        return 1;
    }
    mkdir(dir, 0755);
    for (i = 0; i < n; ++i) {
        buf[0] = tag;
        for (k = 1; k < words; ++k) {
            buf[k] = rd_word(tag, k + (uint64_t)i * words);
        }
        buf[1 % words] = i;          /* which sample, for --pattern */
        snprintf(path, sizeof(path), "%s/s%06u.bin", dir, i);
        f = fopen(path, "wb");
        if ((f == NULL) || (fwrite(buf, 1, size, f) != size) || fclose(f)) {
            fprintf(stderr, "brk_reader: cannot write %s\n", path);
            free(buf);
            return 1;
        }
    }
    free(buf);
    return 0;
}

/* a sample of rd_gen's files: tag, index, then the tag's words */
static int rd_pattern_ok(const void *p, size_t len)
{
    const uint32_t *w = p;
    size_t k, words = len / 4;
    uint32_t tag, i;

    if (words < 2) {
        return 1;
    }
    tag = w[0];
    i   = w[1];
    for (k = 2; k < words; ++k) {
        if (w[k] != rd_word(tag, k + (uint64_t)i * ((len + 3) / 4))) {
            return 0;
        }
    }
    return 1;
}

/* the sample's bytes as they are in its file */
/* the index as it was at open, for rd_check, once --scribble rewrote it */
static const uint8_t *rd_meta_copy;

static int rd_check(cxl_broker_ds_t *ds, uint64_t i, const void *got,
                    size_t len, uint8_t *tmp)
{
    const uint8_t *m = rd_meta_copy ? rd_meta_copy : (const uint8_t*)ds->meta;
    const brk_sample_t *s = (const brk_sample_t*)(m + ds->mh.samples_off) + i;
    const brk_chunk_t *ch = (const brk_chunk_t*)(m + ds->mh.chunks_off) +
                            s->chunk;
    const brk_seg_t *segs = (const brk_seg_t*)(m + ds->mh.segs_off);
    const brk_file_t *files = (const brk_file_t*)(m + ds->mh.files_off);
    const char *strings = (const char*)m + ds->mh.strings_off;
    const brk_seg_t *g = NULL;
    const brk_file_t *f;
    char path[4096];
    uint32_t j;
    int fd, ok;

    for (j = 0; j < ch->nsegs; ++j) {
        g = &segs[ch->first_seg + j];
        if ((s->off >= g->chunk_off) && (s->off + len <= g->chunk_off + g->len)) {
            break;
        }
        g = NULL;
    }
    if (g == NULL) {
        return 0;
    }
    f = &files[g->file];
    snprintf(path, sizeof(path), "%.*s", (int)f->path_len,
             strings + f->path_off);
    fd = open(path, O_RDONLY);
    if (fd < 0) {
        return 0;
    }
    ok = pread(fd, tmp, len, (off_t)(g->file_off + s->off - g->chunk_off)) ==
         (ssize_t)len;
    close(fd);
    return ok && !memcmp(tmp, got, len);
}

/*
 * --scribble: rewrite one field of the index in the pool, as a peer may
 * at any time after a reader checked it (doc/design/trust-model.md).
 */
static int rd_scribble(cxl_broker_ds_t *ds, const char *what)
{
    const char *colon = strchr(what, ':');
    uint64_t i        = (colon != NULL) ? strtoull(colon + 1, NULL, 0) : 0;
    size_t flen       = (colon != NULL) ? (size_t)(colon - what) : 0;
    brk_sample_t *smp;
    brk_seg_t *seg;

    if ((ds->meta_copy != NULL) || (colon == NULL)) {
        fprintf(stderr, "brk_reader: --scribble needs a local reader and "
                "FIELD:INDEX\n");
        return -1;
    }
    rd_meta_copy = malloc(ds->rep.meta_len);
    if (rd_meta_copy == NULL) {
        return -1;
    }
    memcpy((void*)rd_meta_copy, ds->meta, ds->rep.meta_len);
    smp = (brk_sample_t*)ds->samples + i;
    seg = (brk_seg_t*)((char*)ds->meta + ds->mh.segs_off) + i;
    if (!strncmp(what, "sample-chunk", flen) && (i < ds->mh.nsamples)) {
        smp->chunk = 0xfffffff0u;
    } else if (!strncmp(what, "sample-file", flen) && (i < ds->mh.nsamples)) {
        smp->file = 0xfffffff0u;
    } else if (!strncmp(what, "sample-off", flen) && (i < ds->mh.nsamples)) {
        smp->off = 1ull << 40;
    } else if (!strncmp(what, "sample-len", flen) && (i < ds->mh.nsamples)) {
        smp->len = 1ull << 40;
    } else if (!strncmp(what, "seg-len", flen) && (i < ds->mh.nsegs)) {
        seg->len = 1ull << 40;
    } else if (!strncmp(what, "chunk-resident", flen) && (i < ds->rep.nchunks)) {
        brk_cstate_t *cs = (brk_cstate_t*)ds->states + i;

        cs->word = BRK_CSTATE_WORD(BRK_CSTATE_GEN(cs->word) + 1,
                                   BRK_CHUNK_RESIDENT);
    } else if (!strncmp(what, "vrec-nchunks", flen)) {
        brk_vrec_t *v = (brk_vrec_t*)(ds->b->arena + sizeof(brk_hdr_t));
        uint32_t k;

        for (k = 0; k < BRK_MAX_VERSIONS; ++k) {
            if (!strcmp(v[k].name, ds->name) &&
                (v[k].version == ds->rep.version)) {
                v[k].nchunks = 0xfffffff0u;
                break;
            }
        }
        if (k == BRK_MAX_VERSIONS) {
            fprintf(stderr, "brk_reader: no version record of %s\n", ds->name);
            return -1;
        }
    } else {
        fprintf(stderr, "brk_reader: --scribble %s: unknown field or index "
                "out of range\n", what);
        return -1;
    }
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"broker", required_argument, NULL, 'b'},
        {"version", required_argument, NULL, 'V'},
        {"epochs", required_argument, NULL, 'e'},
        {"order", required_argument, NULL, 'o'},
        {"seed", required_argument, NULL, 's'},
        {"announce", no_argument, NULL, 'a'},
        {"batch", required_argument, NULL, 'k'},
        {"check", no_argument, NULL, 'c'},
        {"pattern", no_argument, NULL, 'p'},
        {"view", no_argument, NULL, 'w'},
        {"hold", required_argument, NULL, 'H'},
        {"loop", required_argument, NULL, 'L'},
        {"local", required_argument, NULL, 'l'},
        {"expect-error", no_argument, NULL, 'x'},
        {"scribble", required_argument, NULL, 'S'},
        {"gen", no_argument, NULL, 'g'},
        {"count", required_argument, NULL, 'C'},
        {NULL, 0, NULL, 0}};
    cxl_broker_params_t prm;
    cxl_broker_t *b;
    cxl_broker_ds_t *ds;
    cxl_broker_iov_t *iov;
    cxl_broker_view_t *views = NULL;
    uint64_t n, i, j, *order, bytes = 0, samples = 0, errors = 0, maxlen = 0;
    uint64_t count = UINT64_MAX, lim;
    uint32_t *crcs, digest;
    unsigned version = 0, epochs = 1, batch = 1, e, seed = 1;
    int random = 0, announce = 0, check = 0, pattern = 0, view = 0, expect = 0;
    const char *scribble = NULL;
    double hold = 0, loop = 0, t0, tend;
    uint8_t *bufs, *tmp;
    int opt, st;

    cxl_broker_params_init(&prm);
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 'b': prm.addr = optarg; break;
        case 'V': version = (unsigned)atoi(optarg); break;
        case 'e': epochs = (unsigned)atoi(optarg); break;
        case 'o': random = !strcmp(optarg, "random"); break;
        case 's': seed = (unsigned)atoi(optarg); break;
        case 'a': announce = 1; break;
        case 'k': batch = (unsigned)atoi(optarg); break;
        case 'c': check = 1; break;
        case 'p': pattern = 1; break;
        case 'w': view = 1; break;
        case 'H': hold = atof(optarg); break;
        case 'L': loop = atof(optarg); break;
        case 'l': prm.local = atoi(optarg); break;
        case 'x': expect = 1; break;
        case 'S': scribble = optarg; break;
        case 'C': count = strtoull(optarg, NULL, 0); break;
        case 'g':
            if (argc - optind != 4) {
                fprintf(stderr, "brk_reader --gen DIR N SIZE TAG\n");
                return 2;
            }
            return rd_gen(argv[optind], (unsigned)atoi(argv[optind + 1]),
                          (size_t)atol(argv[optind + 2]),
                          (uint32_t)atoi(argv[optind + 3]));
        default: return 2;
        }
    }
    if ((argc - optind != 1) || (batch == 0) || (batch > 4096)) {
        fprintf(stderr, "usage: brk_reader [OPTIONS] NAME (see the source)\n");
        return 2;
    }
    t0 = brk_cnow();
    st = cxl_broker_connect(&prm, &b);
    if (st != CXL_BROKER_OK) {
        fprintf(stderr, "brk_reader: %s\n", cxl_broker_last_error());
        return expect ? 0 : 1;
    }
    st = cxl_broker_open(b, argv[optind], version, &ds);
    if (st != CXL_BROKER_OK) {
        fprintf(stderr, "brk_reader: %s\n", cxl_broker_last_error());
        cxl_broker_disconnect(b);
        return 1;
    }
    n = cxl_broker_nsamples(ds);
    for (i = 0; i < n; ++i) {
        maxlen = (cxl_broker_sample_len(ds, i) > maxlen) ?
                 cxl_broker_sample_len(ds, i) : maxlen;
    }
    order = malloc(n * sizeof(*order));
    crcs  = calloc(n, sizeof(*crcs));
    iov   = calloc(batch, sizeof(*iov));
    bufs  = malloc(batch * (maxlen ? maxlen : 1));
    tmp   = malloc(maxlen ? maxlen : 1);
    if (view || hold > 0) {
        views = calloc(n, sizeof(*views));
    }
    if (!order || !crcs || !iov || !bufs || !tmp || ((view || hold > 0) && !views)) {
        fprintf(stderr, "brk_reader: out of memory\n");
        return 1;
    }
    if ((scribble != NULL) && (rd_scribble(ds, scribble) != 0)) {
        return 1;
    }
    tend = brk_cnow() + loop;
    for (e = 0; (e < epochs) || ((loop > 0) && (brk_cnow() < tend)); ++e) {
        srand(seed + e);
        for (i = 0; i < n; ++i) {
            order[i] = i;
        }
        for (i = n; random && (i > 1); --i) {
            j = (uint64_t)rand() % i;
            uint64_t t = order[i - 1];
            order[i - 1] = order[j];
            order[j] = t;
        }
        st = cxl_broker_epoch(ds, e, announce ? order : NULL, announce ? n : 0);
        if (st != CXL_BROKER_OK) {
            fprintf(stderr, "brk_reader: epoch: %s\n", cxl_broker_last_error());
            errors++;
            break;
        }
        lim = (count < n) ? count : n;
        for (i = 0; i < lim; i += batch) {
            unsigned k, m = (unsigned)((lim - i < batch) ? lim - i : batch);
            if (view) {
                for (k = 0; k < m; ++k) {
                    cxl_broker_view_t v;
                    st = cxl_broker_view(ds, order[i + k], &v);
                    if (st != CXL_BROKER_OK) {
                        break;
                    }
                    memcpy(bufs + (size_t)k * maxlen, v.data, v.len);
                    iov[k].index = order[i + k];
                    iov[k].got   = v.len;
                    cxl_broker_view_release(ds, &v);
                }
            } else {
                for (k = 0; k < m; ++k) {
                    iov[k].index = order[i + k];
                    iov[k].buf   = bufs + (size_t)k * maxlen;
                    iov[k].len   = maxlen;
                }
                st = cxl_broker_read_batch(ds, iov, m);
            }
            if (st != CXL_BROKER_OK) {
                if (expect) {
                    printf("brk_reader: error after %.2f s: %s\n",
                           brk_cnow() - t0, cxl_broker_last_error());
                    return 0;
                }
                fprintf(stderr, "brk_reader: %s\n", cxl_broker_last_error());
                errors++;
                goto out;
            }
            for (k = 0; k < m; ++k) {
                const uint8_t *p = bufs + (size_t)k * maxlen;
                uint64_t idx = iov[k].index;
                crcs[idx] = cxlpool_crc32c(0, p, iov[k].got);
                bytes += iov[k].got;
                samples++;
                if (check && !rd_check(ds, idx, p, iov[k].got, tmp)) {
                    fprintf(stderr, "brk_reader: sample %" PRIu64 " differs "
                            "from its file\n", idx);
                    errors++;
                }
                if (pattern && !rd_pattern_ok(p, iov[k].got)) {
                    fprintf(stderr, "brk_reader: sample %" PRIu64 " mixes "
                            "versions\n", idx);
                    errors++;
                }
            }
        }
    }
    if (hold > 0) {
        for (i = 0; i < n; ++i) {
            if (cxl_broker_view(ds, i, &views[i]) != CXL_BROKER_OK) {
                fprintf(stderr, "brk_reader: view %" PRIu64 ": %s\n", i,
                        cxl_broker_last_error());
                errors++;
                break;
            }
        }
        printf("brk_reader: holding %" PRIu64 " views\n", i);
        fflush(stdout);
        usleep((useconds_t)(hold * 1e6));
        for (j = 0; j < i; ++j) {
            cxl_broker_view_release(ds, &views[j]);
        }
    }
out:
    digest = cxlpool_crc32c(0, crcs, n * sizeof(*crcs));
    printf("brk_reader: samples %" PRIu64 " bytes %" PRIu64 " digest %08x "
           "errors %" PRIu64 " local %d views-read-only %d\n", samples, bytes,
           digest, errors, cxl_broker_is_local(b), b->ro_map != NULL);
    cxl_broker_close(ds);
    cxl_broker_disconnect(b);
    free(order);
    free(crcs);
    free(iov);
    free(bufs);
    free(tmp);
    free(views);
    if (expect) {
        fprintf(stderr, "brk_reader: expected an error, got none\n");
        return 1;
    }
    return errors ? 1 : 0;
}
