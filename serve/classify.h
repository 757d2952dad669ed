/* Triton's classification extension: instead of an output's values, the top k of each sample as
 * BYTES strings "value:index" (":label" added when the config's label_filename names one), the
 * largest first, as Triton's classification.cc writes them (std::to_string of the value). Shared by
 * the HTTP and gRPC front ends. */
#ifndef RS_SERVE_CLASSIFY_H
#define RS_SERVE_CLASSIFY_H

#include "config.h"
#include "engine/core/status.h"

/* Output k's B samples (y, the scheduler's) become cls (malloc'd, BYTES, B rows of min(topk, elements
 * per sample) strings; one row of all elements for a config that writes the batch in its dims);
 * *per gets the strings per row. The output's label file (one label a line, line i for class i) is
 * read for each call: it is small, and an edit to it shows at once, as a reload would. */
rs_status rs_serve_classify(const rs_serve_config *c, int k, const rs_serve_tensor *y, int64_t B, int topk,
                            rs_serve_tensor *cls, size_t *per, rs_err *err);

#endif
