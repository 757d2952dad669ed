/* Parsing one command's tokens against the command table into an rs_call (see cmd.h), with every
 * error reported on the line with a caret and, for near misses, a suggestion. */
#ifndef RS_CALL_H
#define RS_CALL_H

#include "lang/lex.h"
#include "session.h"

/* Returns 0 and fills *c (free with rs_call_clear) or 1 after reporting the error. line is the whole
 * line the tokens came from (offsets refer to it). */
int rs_call_parse(rs_session *s, const char *line, const rs_tokens *t, rs_call *c);
/* Frees the call's storage; *c itself stays the caller's. */
void rs_call_clear(rs_call *c);

/* The session object named by positional argument i, checked to be of kind (RS_A_MODEL, RS_A_DATA
 * or RS_A_NAME); reports "unknown model 'x' (did you mean 'm'?)" and returns NULL otherwise. */
rs_obj *rs_call_lookup(rs_session *s, const rs_call *c, int i, rs_arg_kind kind);
/* Whether word is one of the words argument a takes besides what its kind names (cmd.h). */
bool rs_arg_is_choice(const rs_argdef *a, const char *word);

void rs_cmd_usage(const rs_cmddef *c, char *buf, size_t n);

#endif
