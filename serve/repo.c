/* Reading a Triton model repository (see repo.h). */
#include "repo.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend_ops.h"

bool rs_serve_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= RS_SERVE_NAME_MAX || name[0] == '.') return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.'))
            return false;
    }
    return true;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

bool rs_serve_repo_has(const char *repo, const char *name)
{
    char p[4200];
    if (!rs_serve_name_ok(name)) return false;
    snprintf(p, sizeof p, "%s/%s", repo, name);
    return is_dir(p);
}

static int64_t mtime_ns(const char *p)
{
    struct stat st;
    if (stat(p, &st)) return 0;
    return (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

/* The newest mtime of dir and what it holds, down depth more levels. */
static int64_t newest(const char *dir, int depth)
{
    int64_t t = mtime_ns(dir);
    DIR *d = depth >= 0 ? opendir(dir) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        int64_t u = is_dir(p) ? newest(p, depth - 1) : mtime_ns(p);
        if (u > t) t = u;
    }
    if (d) closedir(d);
    return t;
}

int64_t rs_serve_repo_stamp(const char *repo, const char *name)
{
    char p[4200];
    if (!rs_serve_name_ok(name)) return 0;
    snprintf(p, sizeof p, "%s/%s", repo, name);
    return is_dir(p) ? newest(p, 1) : 0;
}

static void remove_tree(const char *p, int depth)
{
    struct stat st;
    if (lstat(p, &st)) return;
    if (S_ISDIR(st.st_mode) && depth < 16) {
        DIR *d = opendir(p);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char q[4400];
            snprintf(q, sizeof q, "%s/%s", p, e->d_name);
            remove_tree(q, depth + 1);
        }
        if (d) closedir(d);
        rmdir(p);
    } else {
        unlink(p);
    }
}

void rs_serve_repo_remove_temp(const char *dir)
{
    static const char prefix[] = "/tmp/ringside-serve-";
    if (!dir || strncmp(dir, prefix, sizeof prefix - 1) || strchr(dir + sizeof prefix - 1, '/')) return;
    remove_tree(dir, 0);
}

rs_status rs_serve_repo_list(const char *repo, char ***names, int *n, rs_err *err)
{
    *names = NULL;
    *n = 0;
    DIR *d = opendir(repo);
    if (!d) return rs_err_set(err, RS_ERR_IO, "model repository %s: %s", repo, strerror(errno));
    int cap = 0;
    struct dirent *e;
    rs_status st = RS_OK;
    while ((e = readdir(d))) {
        if (!rs_serve_name_ok(e->d_name)) continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", repo, e->d_name);
        if (!is_dir(p)) continue;
        if (*n == cap) {
            char **nn = realloc(*names, (size_t)(cap = cap ? cap * 2 : 16) * sizeof *nn);
            if (!nn) {
                st = rs_err_set(err, RS_ERR_NOMEM, "out of memory");
                break;
            }
            *names = nn;
        }
        if (!((*names)[*n] = strdup(e->d_name))) {
            st = rs_err_set(err, RS_ERR_NOMEM, "out of memory");
            break;
        }
        (*n)++;
    }
    closedir(d);
    if (st) {
        for (int i = 0; i < *n; i++) free((*names)[i]);
        free(*names);
        *names = NULL;
        *n = 0;
        return st;
    }
    if (*n) qsort(*names, (size_t)*n, sizeof **names, cmp_str);
    return RS_OK;
}

void rs_serve_repo_model_path(const char *repo, const char *name, int64_t version, char *buf, size_t n)
{
    /* the backends' files in their probe order (model.onnx; else a compiled plan; else a GPT's weights,
     * with vocab.json beside them); the first's name when the folder holds none */
    if (!buf || !n) return; /* never so; said for GCC, whose sanitizer build otherwise warns of a NULL buf */
    for (const rs_srv_backend_ops *const *o = rs_srv_backends; *o; o++) {
        snprintf(buf, n, "%s/%s/%lld/%s", repo, name, (long long)version, (*o)->file);
        if (is_file(buf)) return;
    }
    snprintf(buf, n, "%s/%s/%lld/%s", repo, name, (long long)version, rs_srv_backends[0]->file);
}

rs_status rs_serve_repo_model(const char *repo, const char *name, rs_serve_config *c, int64_t *versions, int *nversions,
                              int max, rs_err *err)
{
    *nversions = 0;
    if (!rs_serve_name_ok(name))
        return rs_err_set(err, RS_ERR_ARG, "'%.60s' is not a model name (letters, digits, '_', '-', '.'; not "
                          "starting with '.')", name);
    char dir[4096], p[4200];
    snprintf(dir, sizeof dir, "%s/%s", repo, name);
    if (!is_dir(dir)) return rs_err_set(err, RS_ERR_ARG, "no model '%s' in the repository %s", name, repo);
    snprintf(p, sizeof p, "%s/config.pbtxt", dir);
    if (is_file(p)) {
        rs_status st = rs_serve_config_load(p, c, err);
        if (!st) st = rs_serve_config_check_supported(c, p, err); /* before the folders: an ensemble has no file */
        if (st) return st;
        if (c->name[0] && strcmp(c->name, name))
            return rs_err_set(err, RS_ERR_FORMAT, "%s: name \"%s\" differs from its folder '%s' (Triton requires "
                              "them equal)", p, c->name, name);
    } else {
        rs_serve_config_init(c);
    }
    snprintf(c->name, sizeof c->name, "%s", name);

    /* Every numeric folder holding a model.onnx, ascending. */
    int64_t found[256];
    int nf = 0;
    DIR *d = opendir(dir);
    if (!d) return rs_err_set(err, RS_ERR_IO, "%s: %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) && nf < 256) {
        char *end;
        errno = 0;
        long long v = strtoll(e->d_name, &end, 10);
        if (*end || errno || v < 1 || e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        rs_serve_repo_model_path(repo, name, v, p, sizeof p);
        rs_serve_config_model_path(c, repo, name, v, p, sizeof p);
        bool ok = is_file(p);
        if (!ok && c->ensemble && strrchr(p, '/')) *strrchr(p, '/') = 0, ok = is_dir(p); /* an ensemble's is empty */
        if (ok) found[nf++] = v;
    }
    closedir(d);
    qsort(found, (size_t)nf, sizeof *found, cmp_i64);
    if (nf == 0)
        return rs_err_set(err, RS_ERR_ARG, "model '%s' has no version folder with a model.onnx (%s/1/model.onnx), a model.plan "
                          "(`compile`) or, for a GPT, a model.safetensors",
                          name, dir);
    if (c->vpolicy == RS_SERVE_VP_ALL) {
        for (int i = 0; i < nf && *nversions < max; i++) versions[(*nversions)++] = found[i];
    } else if (c->vpolicy == RS_SERVE_VP_LATEST) {
        int k = c->latest_n < nf ? c->latest_n : nf;
        for (int i = nf - k; i < nf && *nversions < max; i++) versions[(*nversions)++] = found[i];
    } else {
        for (int i = 0; i < nf && *nversions < max; i++)
            for (int j = 0; j < c->nversions; j++)
                if (found[i] == c->versions[j]) versions[(*nversions)++] = found[i];
        if (*nversions == 0)
            return rs_err_set(err, RS_ERR_ARG, "model '%s': none of the versions its version_policy names exists",
                              name);
    }
    return RS_OK;
}
