/* Whole-file reading for the data readers: through zlib, so a .gz and a plain file read the same, with
 * a size cap, so the parsers work on memory only (which is what the fuzz targets exercise). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/data/data.h"
#include "engine/data/internal.h"

/* zlib's message without the "<fd:3>: " that gzdopen puts in front of it. */
static const char *gz_message(gzFile g, int *zerr)
{
    const char *m = gzerror(g, zerr);
    const char *sep = !strncmp(m, "<fd:", 4) ? strstr(m, ": ") : NULL;
    return sep ? sep + 2 : m;
}

rs_status rs_data_read_file(const char *path, size_t max_bytes, uint8_t **out, size_t *len, rs_err *err)
{
    *out = NULL;
    *len = 0;
    if (!max_bytes) max_bytes = RS_DATA_FILE_MAX;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return rs_err_set(err, RS_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return rs_err_set(err, RS_ERR_IO, "%s: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return rs_err_set(err, RS_ERR_IO, "%s: is a directory, expected a data file", path);
    }
    gzFile g = gzdopen(fd, "rb"); /* owns fd from here on */
    if (!g) {
        close(fd);
        return rs_err_set(err, RS_ERR_NOMEM, "%s: cannot start zlib", path);
    }
    gzbuffer(g, 1u << 17);

    /* The on-disk size is the right capacity for a plain file and a first guess for a .gz one. */
    size_t cap = st.st_size > 0 && (uint64_t)st.st_size < max_bytes ? (size_t)st.st_size + 1 : 1u << 16;
    if (cap > max_bytes + 1) cap = max_bytes + 1;
    uint8_t *buf = malloc(cap); /* returned to the caller, who owns it */
    size_t n = 0;
    rs_status s = RS_OK;
    if (!buf) s = rs_err_set(err, RS_ERR_NOMEM, "%s: cannot allocate %zu bytes", path, cap);
    while (s == RS_OK) {
        if (n == cap) {
            if (cap > max_bytes) {
                s = rs_err_set(err, RS_ERR_FORMAT,
                               "%s: larger than %zu bytes (after decompression); ringside reads a "
                               "data file into memory whole and stops there: split the file",
                               path, max_bytes);
                break;
            }
            size_t ncap = cap > max_bytes / 2 ? max_bytes + 1 : cap * 2;
            uint8_t *nb = realloc(buf, ncap);
            if (!nb) {
                s = rs_err_set(err, RS_ERR_NOMEM, "%s: cannot allocate %zu bytes", path, ncap);
                break;
            }
            buf = nb;
            cap = ncap;
        }
        size_t want = cap - n < (1u << 26) ? cap - n : (1u << 26);
        int got = gzread(g, buf + n, (unsigned)want);
        if (got < 0) {
            int zerr;
            const char *zmsg = gz_message(g, &zerr);
            if (zerr == Z_ERRNO)
                s = rs_err_set(err, RS_ERR_IO, "%s: %s", path, strerror(errno));
            else
                s = rs_err_set(err, RS_ERR_FORMAT,
                               "%s: offset %zu (decompressed): gzip data is corrupt or truncated (%s); "
                               "download the file again",
                               path, n, zmsg);
            break;
        }
        if (got == 0) {
            /* zlib returns what it could decompress and keeps a truncated stream as a soft error. */
            int zerr;
            const char *zmsg = gz_message(g, &zerr);
            if (zerr != Z_OK)
                s = rs_err_set(err, RS_ERR_FORMAT,
                               "%s: offset %zu (decompressed): gzip data ends early (%s); the file is "
                               "truncated or corrupt: download it again",
                               path, n, zmsg);
            break;
        }
        n += (size_t)got;
    }
    gzclose(g);
    if (s != RS_OK) {
        free(buf);
        return s;
    }
    *out = buf;
    *len = n;
    return RS_OK;
}

void rs_data_name_from_path(rs_dataset *d, const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n > 3 && !strcmp(base + n - 3, ".gz")) n -= 3;
    /* Drop ".bin"/".csv" but keep names like "data_batch_1"; a leading dot belongs to the name. */
    for (size_t i = n; i > 1; i--)
        if (base[i - 1] == '.') {
            n = i - 1;
            break;
        }
    if (n >= sizeof d->name) n = sizeof d->name - 1;
    memcpy(d->name, base, n);
    d->name[n] = '\0';
}

void rs_data_add_source(rs_dataset *d, const char *s)
{
    size_t used = strlen(d->source), cap = sizeof d->source;
    int w = snprintf(d->source + used, cap - used, "%s%s", used ? ", " : "", s);
    if (w < 0 || (size_t)w >= cap - used) memcpy(d->source + cap - 4, "...", 4);
}
