/*
 * Harness: the number, size and address parsing of the CLIs (cxlpool and
 * cxl-broker) and cxl-broker serve's whole option list.  The first byte
 * picks the parser, the rest is its text:
 *   0 cxlpool_parse_size (cxlpool create --size, serve --capacity, add
 *     --chunk-size ...): accepted exactly when the text is digits with an
 *     optional k/m/g/t[i][b] suffix and the value fits 64 bits, the value
 *     computed here independently; the decimal of it parses back to it;
 *   1 cxlpool_parse_uint (cxlpool's --numa-node, --hosts ..., serve
 *     --readers, warm --version) against a limit from the next 8 bytes:
 *     accepted exactly when the text is digits of a value <= the limit;
 *   2 brk_addr_split (serve --listen, --broker, $CXL_BROKER): an accepted
 *     HOST:PORT is host ":" port with the port 1..65535 in digits;
 *   3 cxlb_serve_opts on NUL-separated arguments: an accepted listen
 *     address splits, readers are 0 (default) or 1..256, an exit status
 *     is 0, 1, 2 or help.
 * Every refusal must leave the output untouched.
 */
#include "fuzz_brk.h"

#include "cxl_broker.h"
#include "brk_wire.h"

#include <ucx_cxl/cxlpool.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CLI_MAX_ARGS 16

static int fuzz_cli_digits(const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; ++i) {
        if ((s[i] < '0') || (s[i] > '9')) {
            return 0;
        }
    }
    return n > 0;
}

/* digits of s[0 .. n) as a value, or 0 in *ok past 2^64 - 1 */
static unsigned __int128 fuzz_cli_value(const char *s, size_t n, int *ok)
{
    unsigned __int128 v = 0;
    size_t i;

    *ok = 1;
    for (i = 0; i < n; ++i) {
        v = v * 10 + (unsigned)(s[i] - '0');
        if (v > UINT64_MAX) {
            *ok = 0;
            return 0;
        }
    }
    return v;
}

static void fuzz_cli_size(const char *s)
{
    static const char units[] = "kmgt";
    const uint64_t canary = 0x5a5a5a5a5a5a5a5aull;
    size_t n = strlen(s), d = 0, rest;
    unsigned __int128 v = 0;
    uint64_t size = canary, back;
    const char *u;
    char buf[32];
    int ok = 0, want, rc;
    unsigned shift = 0;

    while ((d < n) && (s[d] >= '0') && (s[d] <= '9')) {
        d++;
    }
    rest = n - d;
    want = (d > 0);
    if (want && (rest > 0)) {
        u = strchr(units, s[d] | 0x20);
        want = (s[d] != '\0') && (u != NULL) && (rest <= 3);
        if (want) {
            shift = 10u * (unsigned)(u - units + 1);
            /* then "i" and "b", each optional, in that order */
            if (rest == 2) {
                want = ((s[d + 1] | 0x20) == 'i') || ((s[d + 1] | 0x20) == 'b');
            } else if (rest == 3) {
                want = ((s[d + 1] | 0x20) == 'i') && ((s[d + 2] | 0x20) == 'b');
            }
        }
    }
    if (want) {
        v = fuzz_cli_value(s, d, &ok);
        v <<= shift;
        want = ok && (v <= UINT64_MAX);
    }
    rc = cxlpool_parse_size(s, &size);
    if ((rc == 0) != want) {
        fuzz_brk_fail("parse_size('%s'): %s", s, rc ? "refused" : "accepted");
    }
    if (rc != 0) {
        if (size != canary) {
            fuzz_brk_fail("parse_size('%s') refused but wrote", s);
        }
        return;
    }
    if (size != (uint64_t)v) {
        fuzz_brk_fail("parse_size('%s') = %llu", s, (unsigned long long)size);
    }
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)size);
    if (cxlpool_parse_size(buf, &back) || (back != size)) {
        fuzz_brk_fail("parse_size: %s does not parse back", buf);
    }
}

static void fuzz_cli_uint(const char *s, uint64_t max)
{
    const uint64_t canary = 0xa5a5a5a5a5a5a5a5ull;
    uint64_t v = canary;
    unsigned __int128 x = 0;
    int ok = 0, want, rc;

    want = fuzz_cli_digits(s, strlen(s));
    if (want) {
        x    = fuzz_cli_value(s, strlen(s), &ok);
        want = ok && (x <= max);
    }
    rc = cxlpool_parse_uint(s, max, &v);
    if ((rc == 0) != want) {
        fuzz_brk_fail("parse_uint('%s', %llu): %s", s,
                      (unsigned long long)max, rc ? "refused" : "accepted");
    }
    if ((rc == 0) ? (v != (uint64_t)x) : (v != canary)) {
        fuzz_brk_fail("parse_uint('%s') = %llu", s, (unsigned long long)v);
    }
}

static void fuzz_cli_addr(const char *s, int empty_host)
{
    char host[BRK_ADDR_MAX], err[256];
    size_t n = strlen(s), h, i;
    uint16_t port = 0;
    unsigned __int128 v;
    int ok;

    memset(host, 0x7e, sizeof(host));
    if (brk_addr_split(s, empty_host, host, sizeof(host), &port, err,
                       sizeof(err)) != CXL_BROKER_OK) {
        fuzz_brk_check_err(err);
        return;
    }
    h = strnlen(host, sizeof(host));
    if ((h == sizeof(host)) || (n >= BRK_ADDR_MAX) || (h >= n) ||
        memcmp(s, host, h) || (s[h] != ':') || (!empty_host && (h == 0)) ||
        !fuzz_cli_digits(s + h + 1, n - h - 1)) {
        fuzz_brk_fail("addr '%s' split into host '%.*s'", s, (int)h, host);
    }
    for (i = 0; i < h; ++i) {
        if (((unsigned char)host[i] <= 0x20) || (host[i] == 0x7f)) {
            fuzz_brk_fail("addr '%s': a blank or control character in the "
                          "host", s);
        }
    }
    v = fuzz_cli_value(s + h + 1, n - h - 1, &ok);
    if (!ok || (v != port) || (port == 0) || strchr(s + h + 1, ':')) {
        fuzz_brk_fail("addr '%s': port %u", s, port);
    }
}

static void fuzz_cli_serve(const char *text, size_t len)
{
    char *copy, *argv[FUZZ_CLI_MAX_ARGS + 2], *dummy[2] = { "x", NULL };
    char host[BRK_ADDR_MAX], err[256];
    brk_serve_params_t prm;
    int argc = 1, rc;
    uint16_t port;
    size_t i;

    copy = malloc(len + 1);
    if (copy == NULL) {
        abort();
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    argv[0] = "serve";
    for (i = 0; (i < len) && (argc <= FUZZ_CLI_MAX_ARGS); ) {
        argv[argc++] = copy + i;
        i += strlen(copy + i) + 1;
    }
    argv[argc] = NULL;
    /* glibc's getopt keeps a position inside the last argv: start over */
    optind = 0;
    opterr = 0;
    (void)getopt(1, dummy, "");
    rc = cxlb_serve_opts(argc, argv, &prm);
    if ((rc != 0) && (rc != 1) && (rc != 2) && (rc != CXLB_OPTS_HELP)) {
        fuzz_brk_fail("serve options: exit status %d", rc);
    }
    if (rc == 0) {
        if ((prm.listen != NULL) &&
            brk_addr_split(prm.listen, 1, host, sizeof(host), &port, err,
                           sizeof(err))) {
            fuzz_brk_fail("serve --listen '%s' accepted: %s", prm.listen, err);
        }
        if (prm.readers > 256) {
            fuzz_brk_fail("serve --readers %u accepted", prm.readers);
        }
        if ((prm.readahead > 256) || (!prm.readahead_set && prm.readahead)) {
            fuzz_brk_fail("serve --readahead %u accepted (set %d)",
                          prm.readahead, prm.readahead_set);
        }
    }
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t max = 0;
    char *s;

    if (size < 1) {
        return 0;
    }
    if (data[0] % 4 == 3) {
        fuzz_cli_serve((const char*)data + 1, size - 1);
        return 0;
    }
    if ((data[0] % 4 == 1) && (size >= 9)) {
        memcpy(&max, data + 1, 8);
        data += 8;
        size -= 8;
    }
    s = malloc(size);           /* the text, NUL-terminated, exactly */
    if (s == NULL) {
        abort();
    }
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    switch (data[0] % 4) {
    case 0:
        fuzz_cli_size(s);
        break;
    case 1:
        fuzz_cli_uint(s, max);
        break;
    default:
        fuzz_cli_addr(s, data[0] & 4);
        break;
    }
    free(s);
    return 0;
}
