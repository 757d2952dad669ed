/* Writes a small known session log for sqlite3_cli.sh to read with the real sqlite3 shell.
 * Usage: slog-fill DB ARTIFACT: two commands (one failed), a run of 100 steps with loss and acc, and
 * ARTIFACT (created here, 100000 bytes) logged as its checkpoint. */
#include <stdio.h>
#include <string.h>

#include "repl/slog/slog.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: slog-fill DB ARTIFACT\n");
        return 2;
    }
    FILE *f = fopen(argv[2], "wb");
    if (!f) return 1;
    for (int i = 0; i < 100000; i++) fputc((i * 7 + i / 251) & 0xFF, f);
    fclose(f);

    rs_err err = {0};
    rs_slog *log = NULL;
    if (rs_slog_open(argv[1], "slog-fill", &log, &err)) {
        fprintf(stderr, "slog-fill: %s\n", err.msg);
        return 1;
    }
    int64_t c = rs_slog_command_begin(log, "trian m on d", "tty");
    rs_slog_command_end(log, c, "error", "unknown command 'trian' (did you mean 'train'?)");
    c = rs_slog_command_begin(log, "train m on d epochs=1", "tty");
    int64_t run = rs_slog_run_begin(
        log, c, &(rs_slog_run_info){.kind = "train", .model = "m", .dataset = "d", .options_json = "{\"epochs\":1}"});
    for (int s = 0; s < 100; s++) {
        rs_slog_metric(log, run, 0, s, 0, "loss", 1.0 / (s + 1));
        rs_slog_metric(log, run, 0, s, 0, "acc", s / 100.0);
    }
    rs_slog_run_end(log, run, "done", 100, "{\"test_acc\":0.97}", NULL);
    if (!rs_slog_artifact(log, c, run, argv[2], "checkpoint", &err)) {
        fprintf(stderr, "slog-fill: %s\n", err.msg);
        return 1;
    }
    rs_slog_command_end(log, c, "ok", NULL);
    const char *e = rs_slog_last_error(log);
    if (e) fprintf(stderr, "slog-fill: %s\n", e);
    rs_slog_close(log);
    return e ? 1 : 0;
}
