/* Fashion-MNIST (Zalando), read from where Debian's dataset-fashion-mnist package installs it: the
 * real data set ringside offers with no download, next to the built-in `digits` generator. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/data/data.h"

const char *const rs_data_fashion_classes[10] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot",
};

/* dir/stem.gz as Debian ships it, or dir/stem where only an unpacked copy exists. */
static rs_status fashion_path(char *buf, size_t n, const char *dir, const char *stem, rs_err *err)
{
    struct stat st;
    int w = snprintf(buf, n, "%s/%s.gz", dir, stem);
    if (w < 0 || (size_t)w >= n) return rs_err_set(err, RS_ERR_ARG, "%s: directory name too long", dir);
    if (stat(buf, &st) == 0) return RS_OK;
    buf[w - 3] = '\0';
    if (stat(buf, &st) != 0) buf[w - 3] = '.'; /* neither: report the .gz name */
    return RS_OK;
}

static rs_status fashion_part(const char *dir, const char *prefix, const char *name, rs_dataset **out,
                              rs_err *err)
{
    char ip[4096], lp[4096], stem[64];
    rs_status s;
    snprintf(stem, sizeof stem, "%s-images-idx3-ubyte", prefix);
    if ((s = fashion_path(ip, sizeof ip, dir, stem, err))) return s;
    snprintf(stem, sizeof stem, "%s-labels-idx1-ubyte", prefix);
    if ((s = fashion_path(lp, sizeof lp, dir, stem, err))) return s;
    rs_dataset *d;
    if ((s = rs_data_idx_load(ip, lp, &d, err))) return s;
    if (d->h != 28 || d->w != 28) {
        rs_dataset_free(d);
        return rs_err_set(err, RS_ERR_FORMAT,
                          "%s: offset 8: images are %dx%d, Fashion-MNIST's are 28x28; load other IDX "
                          "files with `data NAME = idx IMAGES LABELS`",
                          ip, d->h, d->w);
    }
    for (uint32_t i = 0; i < d->n; i++)
        if (d->y[i] > 9) {
            rs_err_set(err, RS_ERR_FORMAT,
                       "%s: offset %lu: label %d of image %u is not 0..9; Fashion-MNIST has 10 classes",
                       lp, 8ul + i, (int)d->y[i], i);
            rs_dataset_free(d);
            return RS_ERR_FORMAT;
        }
    d->n_classes = 10;
    d->class_names = rs_data_fashion_classes;
    snprintf(d->name, sizeof d->name, "%s", name);
    *out = d;
    return RS_OK;
}

rs_status rs_data_fashion(const char *dir, rs_data_pair *out, rs_err *err)
{
    out->train = out->test = NULL;
    if (!dir) dir = RS_DATA_FASHION_DIR;
    struct stat st;
    const char *why = NULL;
    if (stat(dir, &st) != 0) why = strerror(errno);
    else if (!S_ISDIR(st.st_mode)) why = "not a directory";
    if (why)
        return rs_err_set(err, RS_ERR_IO,
                          "%s: %s: Fashion-MNIST is not installed; `apt-get install "
                          "dataset-fashion-mnist` provides it, or use the built-in `digits` data set",
                          dir, why);
    rs_status s = fashion_part(dir, "train", "fashion-train", &out->train, err);
    if (s == RS_OK) s = fashion_part(dir, "t10k", "fashion-test", &out->test, err);
    if (s != RS_OK) rs_data_pair_clear(out);
    return s;
}
