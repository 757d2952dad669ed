/* Readers of the data set formats ringside accepts: IDX (MNIST), Fashion-MNIST from Debian's package,
 * CIFAR-10 binary batches, CSV and character-level text, plus a seeded train/test split. Every reader has a parse function
 * over memory (what the fuzz targets call) and a load function over files, plain or gzip. */
#ifndef RS_DATA_H
#define RS_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "engine/core/status.h"
#include "engine/data/dataset.h"

/* Whole files are read into memory; past this many bytes (after decompression) a reader refuses, so a
 * gzip bomb or a mistyped path to a disk image fails with a message instead of swapping. */
#define RS_DATA_FILE_MAX ((size_t)1 << 30)

/* Reads all of path into *out through zlib, so plain and .gz files read the same. max_bytes 0 means
 * RS_DATA_FILE_MAX. On success the caller owns *out (free()); it is never NULL, even for an empty
 * file. */
rs_status rs_data_read_file(const char *path, size_t max_bytes, uint8_t **out, size_t *len, rs_err *err);

/* ---- IDX (the MNIST format): magic 00 00 <type> <ndims>, ndims big-endian u32 sizes, data ---- */

#define RS_IDX_MAGIC_IMAGES 0x00000803u /* u8, n x rows x cols */
#define RS_IDX_MAGIC_LABELS 0x00000801u /* u8, n */

/* A parsed IDX header; data points into the caller's buffer (borrowed). */
typedef struct rs_idx {
    uint32_t magic;
    int ndims;          /* 1..4 */
    uint32_t dims[4];
    size_t count;       /* product of dims: the number of u8 elements at data */
    const uint8_t *data;
} rs_idx;

/* Checks header and length of one unsigned-byte IDX file in buf (name is for messages only). */
rs_status rs_data_idx_parse(const uint8_t *buf, size_t len, const char *name, rs_idx *out, rs_err *err);

/* Builds a data set from an images and a labels IDX file already in memory: shape (1, rows, cols),
 * pixels x/255 (torchvision's ToTensor), n_classes = max label + 1 but at least 10. Caller owns *out. */
rs_status rs_data_idx_from_memory(const uint8_t *images, size_t images_len, const char *images_name,
                                  const uint8_t *labels, size_t labels_len, const char *labels_name,
                                  rs_dataset **out, rs_err *err);

/* The same from two files (plain or .gz). Caller owns *out. */
rs_status rs_data_idx_load(const char *images, const char *labels, rs_dataset **out, rs_err *err);

/* ---- Fashion-MNIST, as Debian's package dataset-fashion-mnist installs it ---- */

#define RS_DATA_FASHION_DIR "/usr/share/datasets/fashion-mnist"
extern const char *const rs_data_fashion_classes[10];

/* Loads {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] from dir (NULL: RS_DATA_FASHION_DIR) into
 * out->train (60000) and out->test (10000). The pair owns both; free with rs_data_pair_clear. */
rs_status rs_data_fashion(const char *dir, rs_data_pair *out, rs_err *err);

/* ---- CIFAR-10 binary: records of 1 label byte + 1024 R + 1024 G + 1024 B (32x32, row-major) ---- */

#define RS_CIFAR_RECORD 3073
extern const char *const rs_data_cifar_classes[10];

/* One batch file in memory: shape (3, 32, 32), x/255, labels 0..9. Caller owns *out. */
rs_status rs_data_cifar_parse(const uint8_t *buf, size_t len, const char *name, rs_dataset **out,
                              rs_err *err);
/* Concatenates npaths batch files (e.g. data_batch_1.bin..data_batch_5.bin) in order. Caller owns *out. */
rs_status rs_data_cifar_load(const char *const *paths, int npaths, rs_dataset **out, rs_err *err);

/* ---- CSV: one sample per row, numeric features and one integer label column ---- */

typedef enum rs_csv_header {
    RS_CSV_HEADER_AUTO = 0, /* the first row is a header when any of its fields is not a number */
    RS_CSV_HEADER_YES,
    RS_CSV_HEADER_NO,
} rs_csv_header;

/* A zeroed struct means the defaults, so `(rs_csv_opts){.label_col = -1}` reads well. */
typedef struct rs_csv_opts {
    int label_col;        /* 0-based; negative counts from the end (-1 = last). Default 0 */
    char delimiter;       /* '\0' means ',' */
    rs_csv_header header; /* default auto */
    double scale;         /* features are divided by it (255 for pixel values); 0 means 1 */
} rs_csv_opts;

/* Parses CSV text (need not be NUL-terminated): shape (1, 1, features), features as float (parsed as
 * double, divided by scale, rounded once to float: what numpy.loadtxt(...).astype(float32) gives),
 * labels integers 0..65535, n_classes = max label + 1. Blank lines, CRLF, a UTF-8 BOM and quoted
 * numbers are accepted; numbers are read in the C locale whatever the process locale is. Caller owns
 * *out. */
rs_status rs_data_csv_parse(const char *buf, size_t len, const char *name, const rs_csv_opts *opts,
                            rs_dataset **out, rs_err *err);
rs_status rs_data_csv_load(const char *path, const rs_csv_opts *opts, rs_dataset **out, rs_err *err);

/* ---- Text: a character-level corpus (nanoGPT's shakespeare_char) ----
 * The vocabulary is the text's distinct bytes in increasing order (token id k is the k-th of them); the
 * first 90% of the characters are the training part and the rest the validation part. Each part is a
 * lazy token data set (tokens, y_len = T, shape (1, 1, T), n_classes = vocabulary size) whose sample i
 * is the window x = ids [i, i+T), y = ids [i+1, i+T+1): n = part length - T windows, made on demand.
 * Shuffled sampling over window offsets gives nanoGPT's random windows. A text is refused when it is
 * empty, binary (a NUL byte, or more than 5% control characters) or shorter than
 * rs_data_text_min_chars(ctx); each message names the text and what would work. */

#define RS_DATA_TEXT_CTX 64        /* default window length */
#define RS_DATA_TEXT_CTX_MAX 8192
#define RS_DATA_FORTUNES_DIR "/usr/share/games/fortunes"

typedef struct rs_text_vocab {
    int n;              /* distinct characters */
    uint8_t chars[256]; /* chars[id]: the byte of token id, in increasing byte order */
    int16_t id[256];    /* id[byte]: its token id, -1 when the text does not have it */
} rs_text_vocab;

/* Characters a text needs for ctx: a tenth of it validates and each part needs ctx+1 (10*ctx+1). */
size_t rs_data_text_min_chars(int ctx);

/* A text in memory (name names it in messages and gives the data sets' names, e.g. "tiny.txt" ->
 * "tiny-train", "tiny-val"). out owns both parts; free with rs_data_pair_clear. */
rs_status rs_data_text_parse(const uint8_t *buf, size_t len, const char *name, int ctx, rs_data_pair *out,
                             rs_err *err);
/* A text file, plain or .gz. */
rs_status rs_data_text_load(const char *path, int ctx, rs_data_pair *out, rs_err *err);
/* The fortune files of Debian's fortunes package in dir (NULL: RS_DATA_FORTUNES_DIR): every regular
 * file but strfile's .dat indexes and the .u8 links, in name order, each '%' separator line made an
 * empty line (about 2.5 MB). Names "fortunes-train" / "fortunes-val". */
rs_status rs_data_text_fortunes(const char *dir, int ctx, rs_data_pair *out, rs_err *err);
/* The built-in corpus (engine/data/gen/story.h, about 200 KB): needs nothing installed. Names
 * "text-train" / "text-val". */
rs_status rs_data_text_builtin(int ctx, rs_data_pair *out, rs_err *err);

/* A text part's vocabulary (borrowed from d), or NULL when d is not a text part. */
const rs_text_vocab *rs_text_vocab_of(const rs_dataset *d);
/* Characters in a text part (0 when d is not one). */
size_t rs_text_len(const rs_dataset *d);
/* n characters of s to ids; a character the vocabulary lacks is an error that names it and its offset. */
rs_status rs_text_encode(const rs_text_vocab *v, const char *s, size_t n, int32_t *ids, rs_err *err);
/* n ids to characters in out (n+1 bytes: NUL-terminated); an id outside the vocabulary becomes '?'. */
void rs_text_decode(const rs_text_vocab *v, const int32_t *ids, size_t n, char *out);

/* ---- Split ---- */

/* Deterministic shuffled split of all into out->train and out->test (round(n * test_frac) samples,
 * at least one each), for sources that ship no test files. The same (n, test_frac, seed) always gives
 * the same split; each part keeps the source's order. Takes ownership of all: it is freed on success
 * and on failure alike, so the caller never touches it again. out owns both parts. */
rs_status rs_data_split(rs_dataset *all, double test_frac, uint64_t seed, rs_data_pair *out,
                        rs_err *err);

#endif
