/* A rank for the launcher tests: argv[1 + RANK] (or the last argument) says what this rank does, so
 * one command line describes a whole scenario, e.g. `launch_child sleep:60 exit:3`. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v ? v : "(unset)";
}

/* Descriptors open beyond stdio; the launcher promises there are none. */
static int extra_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && atoi(e->d_name) > 2 && atoi(e->d_name) != dirfd(d)) n++;
    closedir(d);
    return n;
}

/* Writes all of buf in pieces of at most `piece` bytes, so lines arrive split across writes. */
static void write_split(int fd, const char *buf, size_t len, size_t piece)
{
    while (len > 0) {
        size_t n = len < piece ? len : piece;
        ssize_t w = write(fd, buf, n);
        if (w <= 0) exit(5);
        buf += w;
        len -= (size_t)w;
    }
}

static void flood(int rank, long bytes)
{
    char line[256];
    long done = 0;
    for (long i = 0; done < bytes; i++) {
        int pad = (int)(i * 7 % 100);
        int n = snprintf(line, sizeof line, "r%d l%ld %.*s|\n", rank, i, pad,
                         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
        write_split(1, line, (size_t)n, (size_t)(1 + i % 13));
        done += n;
        if (i % 1000 == 0) {
            n = snprintf(line, sizeof line, "e%d l%ld\n", rank, i);
            write_split(2, line, (size_t)n, 3);
        }
    }
    write_split(1, "tail-no-newline", 15, 4);
}

int main(int argc, char **argv)
{
    int rank = atoi(env("RANK"));
    if (argc < 2) return 2;
    const char *mode = argv[1 + rank < argc ? 1 + rank : argc - 1];
    if (strcmp(mode, "env") == 0) {
        printf("RANK=%s WORLD_SIZE=%s LOCAL_RANK=%s LOCAL_WORLD_SIZE=%s GROUP_RANK=%s MASTER_ADDR=%s MASTER_PORT=%s "
               "EXTRA=%s INHERIT=%s fds=%d\n",
               env("RANK"), env("WORLD_SIZE"), env("LOCAL_RANK"), env("LOCAL_WORLD_SIZE"), env("GROUP_RANK"),
               env("MASTER_ADDR"),
               env("MASTER_PORT"), env("RS_TEST_EXTRA"), env("RS_TEST_INHERIT"), extra_fds());
        fprintf(stderr, "hello from rank %d\n", rank);
        return 0;
    }
    if (strncmp(mode, "flood:", 6) == 0) {
        flood(rank, atol(mode + 6));
        return 0;
    }
    if (strncmp(mode, "exit:", 5) == 0) {
        sleep_s(0.1);
        return atoi(mode + 5);
    }
    if (strncmp(mode, "sleep:", 6) == 0) {
        sleep_s(atof(mode + 6));
        return 0;
    }
    if (strncmp(mode, "ignterm:", 8) == 0) {
        signal(SIGTERM, SIG_IGN);
        printf("ignoring SIGTERM\n");
        fflush(stdout);
        sleep_s(atof(mode + 8));
        return 0;
    }
    if (strncmp(mode, "late:", 5) == 0) { /* late:SECONDS:CODE */
        char *colon = strchr(mode + 5, ':');
        sleep_s(atof(mode + 5));
        return colon ? atoi(colon + 1) : 1;
    }
    if (strcmp(mode, "stopself") == 0) {
        raise(SIGSTOP);
        sleep_s(60);
        return 0;
    }
    if (strcmp(mode, "sigkill") == 0) {
        sleep_s(0.1);
        raise(SIGKILL);
    }
    if (strcmp(mode, "ok") == 0) return 0;
    fprintf(stderr, "launch_child: unknown mode '%s'\n", mode);
    return 2;
}
