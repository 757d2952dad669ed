/* DeepSpeed's ds_config.json as `train` options (repl/ds_config.c): `train m on d config=FILE` reads the
 * file's keys through one table (each key: what it becomes in ringside's terms, or why it is refused or
 * ignored), works out DeepSpeed's batch arithmetic against the run's data-parallel world, says what it
 * resolved and what the command line overrode, and runs the same `train` with those options, so a
 * config and the same options typed on the line are one run. `export config N FILE` writes a logged
 * run's settings back as DeepSpeed's file. */
#ifndef RS_DS_CONFIG_H
#define RS_DS_CONFIG_H

#include "cmd.h"
#include "session.h"

/* `train ... config=FILE`: resolves the file and runs train with the resolved options. Returns the
 * command's rc (1 after reporting a refused key, a bad file or DeepSpeed's batch error). */
int rs_ds_config_train(rs_session *s, const rs_call *c);

/* `export config N FILE.json`: run N's logged options (a train run) written as DeepSpeed's keys. */
int rs_ds_config_export(rs_session *s, const rs_call *c);

#endif
