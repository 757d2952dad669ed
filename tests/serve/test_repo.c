/* The repository reader: versions chosen by each version_policy, a config whose name differs from its
 * folder, a model with no version folder, names that would leave the repository, and the listing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rs_test.h"
#include "serve/repo.h"

static char root[] = "/tmp/rs-serve-repo-XXXXXX";

static void put(const char *rel, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void dir(const char *rel)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    mkdir(p, 0755);
}

/* Picks the versions of `name` and writes them as "1,3". */
static const char *pick(const char *name, char *buf, size_t n, rs_err *e)
{
    rs_serve_config c;
    int64_t v[16];
    int nv = 0;
    buf[0] = '\0';
    if (rs_serve_repo_model(root, name, &c, v, &nv, 16, e) != RS_OK) return "error";
    for (int i = 0; i < nv; i++) snprintf(buf + strlen(buf), n - strlen(buf), "%s%lld", i ? "," : "", (long long)v[i]);
    return buf;
}

int main(void)
{
    if (!mkdtemp(root)) RS_SKIP("no temporary folder");
    const char *models[] = {"latest", "latest2", "all", "specific", "none"};
    for (int m = 0; m < 5; m++) {
        dir(models[m]);
        for (int v = 1; v <= 3 && m < 4; v++) {
            char p[64];
            snprintf(p, sizeof p, "%s/%d", models[m], v);
            dir(p);
            snprintf(p, sizeof p, "%s/%d/model.onnx", models[m], v);
            put(p, "");
        }
    }
    dir("latest/10"); /* no model.onnx: not a version */
    dir("latest/abc");
    put("latest2/config.pbtxt", "version_policy { latest { num_versions: 2 } }");
    put("all/config.pbtxt", "name: \"all\"\nversion_policy { all { } }");
    put("specific/config.pbtxt", "version_policy { specific { versions: [ 1, 3, 7 ] } }");
    dir("wrongname");
    dir("wrongname/1");
    put("wrongname/1/model.onnx", "");
    put("wrongname/config.pbtxt", "name: \"other\"");
    dir(".hidden");

    char buf[64];
    rs_err e = {0};
    RS_CHECK(!strcmp(pick("latest", buf, sizeof buf, &e), "3"), "latest: %s %s", buf, e.msg);
    RS_CHECK(!strcmp(pick("latest2", buf, sizeof buf, &e), "2,3"), "latest 2: %s %s", buf, e.msg);
    RS_CHECK(!strcmp(pick("all", buf, sizeof buf, &e), "1,2,3"), "all: %s %s", buf, e.msg);
    RS_CHECK(!strcmp(pick("specific", buf, sizeof buf, &e), "1,3"), "specific: %s %s", buf, e.msg);
    RS_CHECK(!strcmp(pick("none", buf, sizeof buf, &e), "error") && strstr(e.msg, "no version folder"), "%s", e.msg);
    RS_CHECK(!strcmp(pick("wrongname", buf, sizeof buf, &e), "error") && strstr(e.msg, "differs from its folder"),
             "%s", e.msg);
    RS_CHECK(!strcmp(pick("missing", buf, sizeof buf, &e), "error") && strstr(e.msg, "no model 'missing'"), "%s", e.msg);
    RS_CHECK(!strcmp(pick("../tmp", buf, sizeof buf, &e), "error") && strstr(e.msg, "not a model name"), "%s", e.msg);
    RS_CHECK(!strcmp(pick(".hidden", buf, sizeof buf, &e), "error") && strstr(e.msg, "not a model name"), "%s", e.msg);

    char **names;
    int n;
    RS_CHECK(rs_serve_repo_list(root, &names, &n, &e) == RS_OK, "%s", e.msg);
    char all[256] = "";
    for (int i = 0; i < n; i++) {
        snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", i ? " " : "", names[i]);
        free(names[i]);
    }
    free(names);
    RS_CHECK(!strcmp(all, "all latest latest2 none specific wrongname"), "listed: %s", all);
    RS_CHECK(rs_serve_repo_list("/no/such/repo", &names, &n, &e) != RS_OK && strstr(e.msg, "/no/such/repo"), "%s",
             e.msg);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd)) {}
    return rs_test_finish("serve-repo");
}
