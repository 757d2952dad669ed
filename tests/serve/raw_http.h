/* A few lines of HTTP/1.1 over a socket, for the tests that must not depend on any HTTP library:
 * one request per connection (Connection: close), the whole response read to EOF. */
#ifndef RS_TEST_RAW_HTTP_H
#define RS_TEST_RAW_HTTP_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct resp {
    int status;
    char *raw;         /* owned: the whole response */
    size_t n;
    const char *body;  /* into raw */
    size_t body_n;
} resp;

/* Sends head (request line and headers, without the blank line) plus body; reads to EOF. */
static inline int http(int port, const char *head, const void *body, size_t n, resp *r)
{
    memset(r, 0, sizeof *r);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    char h[1024];
    int k = snprintf(h, sizeof h, "%s\r\nHost: t\r\nConnection: close\r\n\r\n", head);
    if (write(fd, h, (size_t)k) != k) {}
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, (const char *)body + off, n - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    size_t cap = 1 << 16;
    r->raw = malloc(cap);
    for (;;) {
        if (r->n + 4096 > cap) r->raw = realloc(r->raw, cap *= 2);
        ssize_t got = read(fd, r->raw + r->n, cap - r->n - 1);
        if (got <= 0) break;
        r->n += (size_t)got;
    }
    r->raw[r->n] = '\0';
    close(fd);
    sscanf(r->raw, "HTTP/1.1 %d", &r->status);
    char *b = strstr(r->raw, "\r\n\r\n");
    r->body = b ? b + 4 : r->raw + r->n;
    r->body_n = r->n - (size_t)(r->body - r->raw);
    return r->status;
}

static inline void post(int port, const char *path, const char *json, resp *r)
{
    char head[512];
    snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nContent-Length: %zu", path, strlen(json));
    http(port, head, json, strlen(json), r);
}

#endif
