/* A few lines of HTTP/1.1 over a socket, for the tests that must not depend on any HTTP library:
 * one request per connection (Connection: close), the whole response read to EOF. */
#ifndef RS_TEST_RAW_HTTP_H
#define RS_TEST_RAW_HTTP_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
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

/* A KServe v2 JSON infer body: one FP32 input `name` of shape[0..rank) holding x (%.9g: each reads back
 * as the same float), with "id" first when id is not NULL. Returns the caller's string, NULL when out
 * of memory. */
static inline char *infer_body(const char *id, const char *name, const int64_t *shape, int rank, const float *x)
{
    size_t numel = 1;
    for (int d = 0; d < rank; d++) numel *= (size_t)shape[d];
    /* a float at %.9g and its comma take at most 17 bytes, a dim 21 */
    size_t cap = 24 * numel + 24 * (size_t)rank + strlen(name) + (id ? strlen(id) : 0) + 128, k = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    k += (size_t)snprintf(s + k, cap - k, "{%s%s%s\"inputs\":[{\"name\":\"%s\",\"datatype\":\"FP32\",\"shape\":[",
                          id ? "\"id\":\"" : "", id ? id : "", id ? "\"," : "", name);
    for (int d = 0; d < rank; d++) k += (size_t)snprintf(s + k, cap - k, "%s%lld", d ? "," : "", (long long)shape[d]);
    k += (size_t)snprintf(s + k, cap - k, "],\"data\":[");
    for (size_t i = 0; i < numel; i++) k += (size_t)snprintf(s + k, cap - k, "%s%.9g", i ? "," : "", x[i]);
    snprintf(s + k, cap - k, "]}]}");
    return s;
}

static inline void post(int port, const char *path, const char *json, resp *r)
{
    char head[512];
    snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nContent-Length: %zu", path, strlen(json));
    http(port, head, json, strlen(json), r);
}

#endif
