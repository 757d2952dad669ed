/* config.pbtxt parser: every field ringside acts on, Triton's spellings (lists or repeated fields,
 * ':' before a message or not, < > braces, comments), errors at file:line:column, and the writer's
 * output read back to the same config. */
#include <string.h>

#include "rs_test.h"
#include "serve/config.h"
#include "serve/repo.h"

static const char full[] =
    "# a Triton config\n"
    "name: \"digits\"\n"
    "platform: \"onnxruntime_onnx\"\n"
    "max_batch_size: 32\n"
    "input [\n"
    "  {\n"
    "    name: \"input\"\n"
    "    data_type: TYPE_FP32\n"
    "    dims: [ 1, 28, 28 ]\n"
    "  }\n"
    "]\n"
    "output { name: \"logits\" data_type: TYPE_FP32 dims: 10 }\n"
    "output < name: 'probs', data_type: TYPE_FP16, dims: [-1] >\n"
    "instance_group [ { count: 2 kind: KIND_CPU }, { kind: KIND_CPU } ]\n"
    "dynamic_batching {\n"
    "  preferred_batch_size: [ 4, 8 ]\n"
    "  preferred_batch_size: 16\n"
    "  max_queue_delay_microseconds: 500\n"
    "  default_queue_policy { max_queue_size: 100 }\n"
    "}\n"
    "model_transaction_policy { decoupled: true }\n"
    "version_policy: { specific { versions: [1, 3] } }\n"
    "optimization { execution_accelerators { cpu_execution_accelerator: [ { name: \"openvino\" } ] } }\n"
    "parameters { key: \"x\" value: { string_value: \"y\" } }\n"
    "parameters [ { value: { string_value: \"tensor\" } key: \"ranks_mode\" }, { key: \"ranks\" value { string_value: \"4\" } } ]\n";

/* Parses text and checks the error message starts with "t.pbtxt:LINE:COL: " and contains needle. */
static void bad(const char *text, int line, int col, const char *needle)
{
    rs_serve_config c;
    rs_err e = {0};
    rs_status st = rs_serve_config_parse(text, strlen(text), "t.pbtxt", &c, &e);
    char where[64];
    snprintf(where, sizeof where, "t.pbtxt:%d:%d: ", line, col);
    RS_CHECK(st != RS_OK, "accepted: %s", text);
    RS_CHECK(!strncmp(e.msg, where, strlen(where)), "want '%s...', got '%s'", where, e.msg);
    RS_CHECK(strstr(e.msg, needle) != NULL, "want '%s' in '%s'", needle, e.msg);
}

int main(void)
{
    rs_serve_config c;
    rs_err e = {0};
    rs_status st = rs_serve_config_parse(full, strlen(full), "full.pbtxt", &c, &e);
    RS_CHECK(st == RS_OK, "%s", e.msg);
    RS_CHECK(!strcmp(c.name, "digits") && !strcmp(c.platform, "onnxruntime_onnx"), "name %s platform %s", c.name,
             c.platform);
    RS_CHECK(c.max_batch_size == 32, "%d", c.max_batch_size);
    RS_CHECK(c.ninputs == 1 && c.noutputs == 2, "%d %d", c.ninputs, c.noutputs);
    RS_CHECK(c.inputs[0].rank == 3 && c.inputs[0].dims[0] == 1 && c.inputs[0].dims[2] == 28, "input dims");
    RS_CHECK(c.inputs[0].dtype == RS_SERVE_FP32 && c.outputs[1].dtype == RS_SERVE_FP16, "dtypes");
    RS_CHECK(c.outputs[0].rank == 1 && c.outputs[0].dims[0] == 10 && c.outputs[1].dims[0] == -1, "output dims");
    RS_CHECK(!strcmp(c.outputs[1].name, "probs"), "%s", c.outputs[1].name);
    RS_CHECK(c.instance_count == 3 && !strcmp(c.instance_kind, "KIND_CPU"), "instances %d", c.instance_count);
    RS_CHECK(c.dynamic_batching && c.npreferred == 3 && c.preferred[2] == 16, "preferred %d", c.npreferred);
    RS_CHECK(c.max_queue_delay_us == 500 && c.max_queue_size == 100, "delay %lld", (long long)c.max_queue_delay_us);
    RS_CHECK(c.decoupled, "decoupled");
    RS_CHECK(c.vpolicy == RS_SERVE_VP_SPECIFIC && c.nversions == 2 && c.versions[1] == 3, "versions");
    RS_CHECK(c.ranks == 4 && !strcmp(c.ranks_mode, "tensor"), "ranks %d mode '%s'", c.ranks, c.ranks_mode);

    /* The writer's text parses back to the same settings. */
    char *w = rs_serve_config_write(&c);
    rs_serve_config d;
    st = rs_serve_config_parse(w, strlen(w), "written", &d, &e);
    RS_CHECK(st == RS_OK, "%s\n%s", e.msg, w);
    RS_CHECK(!strcmp(d.name, c.name) && d.max_batch_size == 32 && d.noutputs == 2 && d.outputs[1].dims[0] == -1 &&
                 d.instance_count == 3 && d.npreferred == 3 && d.max_queue_delay_us == 500 && d.max_queue_size == 100 &&
                 d.decoupled && d.nversions == 2 && d.ranks == 4 && !strcmp(d.ranks_mode, "tensor"),
             "written config differs:\n%s", w);
    free(w);

    /* Defaults and the other version policies. */
    const char *lat = "version_policy { latest { num_versions: 2 } }";
    RS_CHECK(rs_serve_config_parse(lat, strlen(lat), "x", &c, &e) == RS_OK && c.vpolicy == RS_SERVE_VP_LATEST &&
                 c.latest_n == 2 && c.instance_count == 0 && !c.dynamic_batching,
             "latest: %s", e.msg);
    const char *all = "version_policy: { all: {} }";
    RS_CHECK(rs_serve_config_parse(all, strlen(all), "x", &c, &e) == RS_OK && c.vpolicy == RS_SERVE_VP_ALL, "all");
    RS_CHECK(rs_serve_config_parse("", 0, "x", &c, &e) == RS_OK && c.latest_n == 1, "empty config");

    /* Errors point at the place. */
    /* a number longer than the 40 characters a message quotes is refused, not read from its first 40
     * (this one would have read as 0) */
    bad("max_batch_size: 0x0000000000000000000000000000000000000010", 1, 17, "is not an integer");
    bad("name: \"a\"\nmax_batch_siz: 3\n", 2, 1, "unknown field 'max_batch_siz'");
    bad("max_batch_size: -2", 1, 17, "out of range");
    bad("max_batch_size: x", 1, 17, "expected an integer");
    bad("input [ { name: \"a\" data_type: TYPE_FLOAT } ]", 1, 32, "unknown data_type 'TYPE_FLOAT'");
    bad("input [ { name: \"a\" data_type: TYPE_FP32 dims: [ 1 2 ] } ]", 1, 52, "expected ',' or ']'");
    bad("dynamic_batching {\n  max_queue_delay_microseconds: 5\n", 3, 1, "expected '}'");
    bad("dynamic_batching { preferred: 3 }", 1, 20, "unknown field 'preferred' in dynamic_batching");
    bad("instance_group [ { count: 2 kind: KIND_TPU } ]", 1, 35, "unknown kind 'KIND_TPU'");
    bad("name: digits", 1, 7, "expected a \"quoted string\"");
    bad("name: \"unterminated\n", 1, 7, "expected a \"quoted string\"");
    bad("  }", 1, 3, "expected a field name");
    bad("model_transaction_policy { decoupled: maybe }", 1, 39, "expected true or false");
    bad("version_policy { newest { } }", 1, 18, "unknown field 'newest' in version_policy");
    bad("parameters { key: \"ranks\" value: { string_value: \"0\" } }", 1, 48, "parameter ranks is '0'");
    bad("parameters { key: \"ranks\" value: { string_value: \"two\" } }", 1, 48, "1..64");
    bad("parameters { key: \"ranks_mode\" value: { string_value: \"diagonal\" } }", 1, 53, "\"pipeline\" or \"tensor\"");
    bad("parameters { key: \"ranks\" val: { } }", 1, 27, "unknown field 'val' in parameters");
    /* Deep nesting of skipped fields stops at a limit instead of the stack. */
    char deep[400] = "optimization ";
    for (int i = 0; i < 40; i++) strcat(deep, "{ a ");
    bad(deep, 1, 14 + 4 * 32, "nested too deep"); /* the 33rd '{' */
    const char *noname = "input [ { data_type: TYPE_FP32 } ]";
    RS_CHECK(rs_serve_config_parse(noname, strlen(noname), "n.pbtxt", &c, &e) != RS_OK && strstr(e.msg, "no name"),
             "%s", e.msg);

    /* Model names: one safe path component. */
    RS_CHECK(rs_serve_name_ok("digits") && rs_serve_name_ok("resnet-50_v1.2"), "good names");
    const char *nope[] = {"", ".", "..", "../x", "a/b", ".hidden", "a b", "a\\b", "x\n"};
    for (size_t i = 0; i < sizeof nope / sizeof *nope; i++)
        RS_CHECK(!rs_serve_name_ok(nope[i]), "accepted name '%s'", nope[i]);
    return rs_test_finish("serve-config");
}
