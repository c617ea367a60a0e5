/*
 * FILES: one sample per regular file.  A directory is walked recursively
 * (symlinks followed, as stat sees them) and its files are added in
 * bytewise order of their whole paths, which is not the order a walk that
 * sorts each directory gives ("a.txt" < "a/x"), hence collect, then sort.
 * Other file types in a directory (fifos, sockets, devices) hold no data
 * to serve and are passed over; a path the user names must be a file or a
 * directory.
 */
#include "brk_scan_int.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    char   **paths;
    size_t   n, cap;
} brk_path_list_t;

/* A directory on the current walk, to stop at symlink loops. */
typedef struct brk_walk_dir {
    dev_t                      dev;
    ino_t                      ino;
    const struct brk_walk_dir *up;
} brk_walk_dir_t;

static int brk_path_list_add(brk_path_list_t *l, char *path)
{
    char **p;

    if (l->n == l->cap) {
        l->cap = (l->cap == 0) ? 64 : l->cap * 2;
        p = realloc(l->paths, l->cap * sizeof(*p));
        if (p == NULL) {
            return -1;
        }
        l->paths = p;
    }
    l->paths[l->n++] = path;
    return 0;
}

static void brk_path_list_free(brk_path_list_t *l)
{
    size_t i;

    for (i = 0; i < l->n; ++i) {
        free(l->paths[i]);
    }
    free(l->paths);
}

static int brk_path_cmp(const void *a, const void *b)
{
    /* strcmp compares as unsigned char: bytewise */
    return strcmp(*(char *const*)a, *(char *const*)b);
}

static char *brk_path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir), m = strlen(name);
    char *p;

    while ((n > 1) && (dir[n - 1] == '/')) {
        --n;    /* "d/" + "x" is "d/x", and "/" + "x" is "/x" */
    }
    p = malloc(n + 1 + m + 1);
    if (p == NULL) {
        return NULL;
    }
    memcpy(p, dir, n);
    if ((n == 0) || (p[n - 1] != '/')) {
        p[n++] = '/';
    }
    memcpy(p + n, name, m + 1);
    return p;
}

static int brk_walk(brk_scan_ctx_t *ctx, const char *dir,
                    const brk_walk_dir_t *self, brk_path_list_t *out)
{
    const brk_walk_dir_t *a;
    brk_walk_dir_t sub;
    struct dirent *e;
    struct stat st;
    char *path;
    DIR *d;
    int ret = -1;

    d = opendir(dir);
    if (d == NULL) {
        return brk_scan_err(ctx, "%s: cannot open directory: %s", dir,
                            strerror(errno));
    }
    for (;;) {
        errno = 0;
        e     = readdir(d);
        if (e == NULL) {
            if (errno != 0) {
                brk_scan_err(ctx, "%s: cannot read directory: %s", dir,
                             strerror(errno));
                goto out;
            }
            break;
        }
        if ((strcmp(e->d_name, ".") == 0) || (strcmp(e->d_name, "..") == 0)) {
            continue;
        }
        path = brk_path_join(dir, e->d_name);
        if (path == NULL) {
            brk_scan_err(ctx, "%s: out of memory", dir);
            goto out;
        }
        if (stat(path, &st) != 0) {
            /* a dangling link is input the user named, not to skip */
            brk_scan_err(ctx, "%s: %s", path, strerror(errno));
            free(path);
            goto out;
        }
        if (S_ISREG(st.st_mode)) {
            if (brk_path_list_add(out, path) != 0) {
                brk_scan_err(ctx, "%s: out of memory", path);
                free(path);
                goto out;
            }
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            for (a = self; a != NULL; a = a->up) {
                if ((a->dev == st.st_dev) && (a->ino == st.st_ino)) {
                    brk_scan_err(ctx, "%s: a symlink loop (the directory "
                                 "contains itself)", path);
                    free(path);
                    goto out;
                }
            }
            sub.dev = st.st_dev;
            sub.ino = st.st_ino;
            sub.up  = self;
            if (brk_walk(ctx, path, &sub, out) != 0) {
                free(path);
                goto out;
            }
        }
        free(path);
    }
    ret = 0;
out:
    closedir(d);
    return ret;
}

/* A regular file: open it (it must be readable now), one sample. */
static int brk_scan_one_file(brk_scan_ctx_t *ctx, const char *path)
{
    struct stat st;
    uint32_t file;
    int fd, ret;

    fd = brk_scan_open(ctx, path, &st);
    if (fd < 0) {
        return -1;
    }
    close(fd);
    ret = brk_desc_add_file(ctx, path, &st, NULL, &file);
    if (ret == 0) {
        ret = brk_desc_add_sample(ctx, file, 0, (uint64_t)st.st_size);
    }
    return ret;
}

int brk_scan_files(brk_scan_ctx_t *ctx, const char *path)
{
    brk_path_list_t list = { NULL, 0, 0 };
    brk_walk_dir_t top;
    struct stat st;
    size_t i;
    int ret;

    if (stat(path, &st) != 0) {
        return brk_scan_err(ctx, "%s: %s", path, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode)) {
        return brk_scan_one_file(ctx, path);  /* says if it is no file */
    }
    top.dev = st.st_dev;
    top.ino = st.st_ino;
    top.up  = NULL;
    ret     = brk_walk(ctx, path, &top, &list);
    if (ret == 0) {
        if (list.n > 1) {
            qsort(list.paths, list.n, sizeof(*list.paths), brk_path_cmp);
        }
        for (i = 0; (ret == 0) && (i < list.n); ++i) {
            ret = brk_scan_one_file(ctx, list.paths[i]);
        }
    }
    brk_path_list_free(&list);
    return ret;
}
