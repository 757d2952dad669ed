/* The job core's own split (ranks_feed.c, for ranks_job.c), not for kinds: what a rank's line goes
 * through, and step=1's releases. */
#ifndef RS_RANKS_FEED_H
#define RS_RANKS_FEED_H

#include "ranks_job.h"

/* The launcher's line callback (rs_launch_line_fn); ud is the job. */
void rs_job_on_line(void *ud, int rank, int is_stderr, const char *line);
/* A rank's monotonic stamp as the session log keeps it, for the view (see ranks_feed.c). */
double rs_job_logged_time(const rs_job *j, double t);
/* step=1: lets the ranks run algorithm step k of the current collective (once some rank reached it). */
void rs_job_step_release(rs_job *j, int k);

#endif
