/* `play`: lists the tutorials, or plays one (by number, name or file) in interactive, auto or step mode,
 * and puts the session's settings back afterwards, whether it ended, failed or was stopped. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "call.h"
#include "lang/value.h"
#include "repl.h"
#include "tutorials.h"

/* The file `play WORD` means: a tutorial's, or a script's; "" after reporting none. */
static int resolve(rs_session *s, const rs_call *c, char *path, size_t cap)
{
    const char *arg = c->args[0];
    size_t len = strlen(arg);
    bool looks_like_file = strchr(arg, '/') || (len > 5 && !strcmp(arg + len - 5, ".ring"));
    if (looks_like_file && access(arg, R_OK) == 0) {
        snprintf(path, cap, "%s", arg);
        return 0;
    }
    rs_tutorial *t;
    int n = rs_tutorials_list(rs_repl_tutorial_dir(), &t);
    const rs_tutorial *hit = rs_tutorials_find(t, n, arg);
    if (hit) {
        snprintf(path, cap, "%s", hit->path);
        free(t);
        return 0;
    }
    if (access(arg, R_OK) == 0) { /* a script in this folder with a name of its own */
        snprintf(path, cap, "%s", arg);
        free(t);
        return 0;
    }
    const char *names[128];
    int k = 0;
    for (int i = 0; i < n && k < 128; i++) names[k++] = t[i].name;
    const char *near = rs_val_near_miss(arg, names, k);
    char hint[96] = "";
    if (near) snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
    int rc = looks_like_file ? rs_session_error(s, c, c->arg_pos[0], len, "play: cannot read %s: %s", arg, strerror(errno))
                             : rs_session_error(s, c, c->arg_pos[0], len,
                                                "play: no tutorial '%s'%s and no file of that name; `play` lists the "
                                                "tutorials",
                                                arg, hint);
    free(t);
    return rc;
}

int rs_cmd_play(rs_session *s, const rs_call *c)
{
    if (c->nargs == 0) {
        rs_play_list(s);
        return 0;
    }
    char path[1024];
    if (resolve(s, c, path, sizeof path)) return 1;
    rs_play_mode mode = (rs_play_mode)rs_call_opt(c, "mode")->v.choice;
    if (c->nargs > 1) {
        if (!strcmp(c->args[1], "auto")) mode = RS_PLAY_AUTO;
        else if (!strcmp(c->args[1], "step")) mode = RS_PLAY_STEP;
        else if (!strcmp(c->args[1], "interactive")) mode = RS_PLAY_INTERACTIVE;
        else
            return rs_session_error(s, c, c->arg_pos[1], strlen(c->args[1]),
                                    "play: mode '%s' is not one of interactive, auto, step", c->args[1]);
    }
    if (s->play_depth >= 4)
        return rs_session_error(s, c, c->arg_pos[0], strlen(c->args[0]), "play: tutorials nest at most 4 deep");
    rs_play_mode old_mode = s->play_mode;
    bool old_echo = s->echo, old_keep = s->keep_going;
    rs_settings settings;
    rs_settings_save(s, &settings);
    s->play_mode = mode;
    s->play_depth++;
    s->echo = true;
    s->keep_going = false;
    int errors = rs_repl_file(s, path);
    s->play_depth--;
    s->pause_served = false; /* a view's key for a pause the tutorial never reached (it stopped) */
    s->play_mode = old_mode;
    s->echo = old_echo;
    s->keep_going = old_keep;
    rs_settings_restore(s, &settings); /* a tutorial's `set threads=1 seed=1` is the tutorial's own */
    if (errors) return rs_session_error(s, c, (size_t)-1, 0, "play: %s stopped after an error", path);
    return 0;
}
