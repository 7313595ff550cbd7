/* loadgen: the HTTP load generator of bench/run.sh (issue 6). Loopback only.
 *
 *   loadgen run   --port N --body FILE [--body FILE ...] [options]   drive POST requests, print one JSON line
 *   loadgen ready --port N [--path /readyz] [--log FILE] -- CMD ARG...  exec CMD, time until PATH answers 200
 *
 * run: one thread, epoll, non-blocking keep-alive sockets, bodies read into memory and pre-built
 * into complete HTTP requests before the clock starts (sent round-robin). Closed loop by default:
 * every connection sends its next request as soon as the previous answer is read. With --rate R it
 * is open loop: request i is due at start + i/R whatever happened before; when no connection is
 * free it waits in a backlog and its latency still counts from the time it was due (no coordinated
 * omission). Answers completing in the measurement window [warmup, warmup + duration] are counted;
 * the window is extended (up to --max-duration) until --min-responses answers were counted; then no
 * request is sent any more and the answers in flight are drained (not counted, up to --drain s) so
 * that the server is idle for the next run. Bounded: at most --max-requests requests are sent.
 *
 * Several servers (--port repeated, e.g. replicas of a fleet on one database): connection i goes to
 * the (i mod n)-th port, for its whole life (reconnects included); one latency distribution over all.
 *
 * Server figures (--pid, repeatable, e.g. every uvicorn process): CPU time utime + stime from
 * /proc/PID/stat at the window's start and end; peak RSS = VmHWM from /proc/PID/status at the end,
 * after resetting it at the start (echo 5 > /proc/PID/clear_refs, when permitted; "hwm_reset" says
 * whether it was, otherwise it is the peak since the process started).
 *
 * ready: fork + exec CMD (stdout and stderr to --log or /dev/null), poll GET PATH on 127.0.0.1:PORT
 * every millisecond until it answers 200, print {"ready_ms", "rss_kb", "hwm_kb", ...}, then SIGTERM
 * the process and wait for it (SIGKILL after 15 s). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_BODIES 16
#define MAX_HEADERS 16
#define MAX_PIDS 64
#define MAX_CONNS 1024
#define MAX_PORTS 8

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "loadgen: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) die("%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) die("%s: read failed", path);
    fclose(f);
    buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

/* ------------------------------------------------------------------ /proc */

static double proc_cpu_s(int pid) {
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p) return -1;
    p += 2; /* field 3, state */
    unsigned long long ut = 0, st = 0;
    for (int field = 3; field <= 15 && *p; field++) {
        if (field == 14) ut = strtoull(p, NULL, 10);
        if (field == 15) st = strtoull(p, NULL, 10);
        p = strchr(p, ' ');
        if (!p) break;
        p++;
    }
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Machine-wide busy and steal CPU seconds from the first line of /proc/stat. */
static void proc_stat_busy(double *busy, double *steal) {
    unsigned long long v[10] = {0};
    *busy = *steal = -1;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return;
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                   &v[6], &v[7], &v[8], &v[9]);
    fclose(f);
    if (n < 8) return;
    double tick = (double)sysconf(_SC_CLK_TCK);
    *busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6]) / tick; /* user nice system irq softirq */
    *steal = (double)v[7] / tick;
}

static long proc_status_kb(int pid, const char *key) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = strtol(line + kl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

static bool reset_hwm(int pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/clear_refs", pid);
    int fd = open(path, O_WRONLY);
    if (fd < 0) return false;
    bool ok = write(fd, "5", 1) == 1;
    close(fd);
    return ok;
}

/* ------------------------------------------------------------------ sockets */

static struct sockaddr_in server_addr(const char *host, int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) die("--host must be a numeric IPv4 address: %s", host);
    if ((ntohl(a.sin_addr.s_addr) >> 24) != 127) die("--host %s is not a loopback address; loadgen is loopback only", host);
    return a;
}

static int connect_to(const struct sockaddr_in *a, bool nonblocking) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (const struct sockaddr *)a, sizeof *a) != 0) {
        close(fd);
        return -1;
    }
    if (nonblocking) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

/* ------------------------------------------------------------------ HTTP response parsing */

typedef struct response_parser {
    size_t hdr_end;       /* 0 until the header is complete; then the offset of the body */
    int status;
    long long content_length; /* -1 when absent */
    bool chunked, close;
    size_t chunk_pos;     /* chunked: offset of the next chunk-size line */
} response_parser;

static const char *find_crlf2(const char *buf, size_t len, size_t from) {
    for (size_t i = from; i + 3 < len; i++)
        if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n') return buf + i;
    return NULL;
}

/* Returns 1 when the response in buf[0, len) is complete, 0 when more bytes are needed, -1 on a
 * malformed response. */
static int parse_response(response_parser *p, const char *buf, size_t len, size_t prev_len) {
    if (!p->hdr_end) {
        const char *e = find_crlf2(buf, len, prev_len > 3 ? prev_len - 3 : 0);
        if (!e) return len > 65536 ? -1 : 0;
        p->hdr_end = (size_t)(e - buf) + 4;
        if (len < 12 || strncmp(buf, "HTTP/1.", 7) != 0) return -1;
        p->status = atoi(buf + 9);
        p->content_length = -1;
        const char *line = memchr(buf, '\n', p->hdr_end) + 1;
        while (line < buf + p->hdr_end - 2) {
            const char *eol = memchr(line, '\n', (size_t)(buf + p->hdr_end - line));
            if (!eol) break;
            if (strncasecmp(line, "content-length:", 15) == 0) p->content_length = atoll(line + 15);
            else if (strncasecmp(line, "transfer-encoding:", 18) == 0) {
                const char *v = line + 18;
                while (*v == ' ') v++;
                p->chunked = strncasecmp(v, "chunked", 7) == 0;
            } else if (strncasecmp(line, "connection:", 11) == 0) {
                const char *v = line + 11;
                while (*v == ' ') v++;
                p->close = strncasecmp(v, "close", 5) == 0;
            }
            line = eol + 1;
        }
        p->chunk_pos = p->hdr_end;
    }
    if (p->chunked) {
        for (;;) {
            const char *nl = memchr(buf + p->chunk_pos, '\n', len - p->chunk_pos);
            if (!nl) return 0;
            long long size = strtoll(buf + p->chunk_pos, NULL, 16);
            size_t data = (size_t)(nl - buf) + 1;
            if (size == 0) { /* last chunk, no trailers expected */
                return len >= data + 2 ? 1 : 0;
            }
            if (len < data + (size_t)size + 2) return 0;
            p->chunk_pos = data + (size_t)size + 2;
        }
    }
    if (p->content_length < 0) return p->close ? 0 : 1; /* no body (e.g. 204) unless close-delimited */
    return len >= p->hdr_end + (size_t)p->content_length ? 1 : 0;
}

/* ------------------------------------------------------------------ run */

enum { C_IDLE, C_WRITING, C_READING };

typedef struct conn {
    int fd, state, body;
    const char *req;
    size_t req_len, sent;
    char *buf;
    size_t cap, len;
    int64_t t_start; /* latency origin: the time the request was due (open loop) or sent (closed) */
    response_parser rp;
} conn;

typedef struct options {
    const char *host, *path, *label;
    int port, connections, items; /* port: the first of ports */
    int ports[MAX_PORTS];
    int n_ports;
    double warmup, duration, max_duration, drain, rate;
    long max_requests, min_responses;
    const char *bodies[MAX_BODIES];
    int n_bodies;
    const char *headers[MAX_HEADERS];
    int n_headers;
    int pids[MAX_PIDS];
    int n_pids;
} options;

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double pct_ms(const int64_t *sorted, long n, double q) {
    if (n == 0) return 0;
    long i = (long)(q * (double)n + 0.999999) - 1; /* nearest rank */
    if (i < 0) i = 0;
    if (i >= n) i = n - 1;
    return (double)sorted[i] / 1e6;
}

static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", *s);
        else putchar(*s);
    }
    putchar('"');
}

static int cmd_run(options *o) {
    struct sockaddr_in addrs[MAX_PORTS];
    for (int p = 0; p < o->n_ports; p++) addrs[p] = server_addr(o->host, o->ports[p]);
    if (o->n_bodies == 0) die("run: at least one --body FILE");
    if (o->connections < 1 || o->connections > MAX_CONNS) die("--connections must be 1..%d", MAX_CONNS);

    /* Pre-built requests. */
    char *reqs[MAX_BODIES];
    size_t req_len[MAX_BODIES];
    double body_bytes = 0;
    for (int b = 0; b < o->n_bodies; b++) {
        size_t blen;
        char *body = read_file(o->bodies[b], &blen);
        body_bytes += (double)blen / o->n_bodies;
        size_t hcap = 512;
        for (int h = 0; h < o->n_headers; h++) hcap += strlen(o->headers[h]) + 2;
        reqs[b] = malloc(hcap + blen);
        int off = snprintf(reqs[b], hcap,
                           "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                           "Content-Length: %zu\r\n",
                           o->path, o->host, o->port, blen);
        for (int h = 0; h < o->n_headers; h++) off += snprintf(reqs[b] + off, hcap - (size_t)off, "%s\r\n", o->headers[h]);
        off += snprintf(reqs[b] + off, hcap - (size_t)off, "\r\n");
        memcpy(reqs[b] + off, body, blen);
        req_len[b] = (size_t)off + blen;
        free(body);
    }

    int ep = epoll_create1(EPOLL_CLOEXEC);
    conn *cs = calloc((size_t)o->connections, sizeof *cs);
    for (int i = 0; i < o->connections; i++) {
        cs[i].fd = connect_to(&addrs[i % o->n_ports], true);
        if (cs[i].fd < 0) die("connect 127.0.0.1:%d: %s", o->ports[i % o->n_ports], strerror(errno));
        cs[i].state = C_IDLE;
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev);
    }

    bool open_loop = o->rate > 0;
    long lat_cap = 1 << 16, n_lat = 0;
    int64_t *lat = malloc((size_t)lat_cap * sizeof *lat);
    long sent_total = 0, done_total = 0, errors = 0, non2xx = 0, in_flight = 0, reconnects = 0;
    long backlog_max = 0;
    size_t ring_cap = 1 << 20, ring_head = 0, ring_len = 0; /* open loop: due times waiting for a connection */
    int64_t *ring = open_loop ? malloc(ring_cap * sizeof *ring) : NULL;
    int next_body = 0;
    char first_error[512] = "";

    bool hwm_reset = o->n_pids > 0;
    for (int p = 0; p < o->n_pids; p++) hwm_reset = reset_hwm(o->pids[p]) && hwm_reset;

    struct rusage ru0, ru1;
    int64_t t0 = now_ns();
    int64_t w_start = t0 + (int64_t)(o->warmup * 1e9);
    int64_t w_end = w_start + (int64_t)(o->duration * 1e9);
    int64_t w_hard = w_start + (int64_t)(o->max_duration * 1e9);
    int64_t next_due = t0;
    double cpu0[MAX_PIDS] = {0}, cpu1[MAX_PIDS] = {0}, busy0 = -1, busy1 = -1, steal0 = 0, steal1 = 0;
    bool window_started = false, stopping = false;
    int64_t stop_time = 0, window_ns = 0;

    /* Sends the next request on connection c, with latency origin t_start. */
#define SEND(ci, tstart)                                                                    \
    do {                                                                                    \
        conn *c_ = &cs[ci];                                                                 \
        c_->body = next_body;                                                               \
        next_body = (next_body + 1) % o->n_bodies;                                          \
        c_->req = reqs[c_->body];                                                           \
        c_->req_len = req_len[c_->body];                                                    \
        c_->sent = 0;                                                                       \
        c_->len = 0;                                                                        \
        memset(&c_->rp, 0, sizeof c_->rp);                                                  \
        c_->t_start = (tstart);                                                             \
        c_->state = C_WRITING;                                                              \
        sent_total++;                                                                       \
        in_flight++;                                                                        \
        struct epoll_event ev_ = {.events = EPOLLOUT, .data.u32 = (uint32_t)(ci)};         \
        epoll_ctl(ep, EPOLL_CTL_MOD, c_->fd, &ev_);                                         \
    } while (0)

    if (!open_loop)
        for (int i = 0; i < o->connections && sent_total < o->max_requests; i++) SEND(i, now_ns());

    struct epoll_event evs[256];
    for (;;) {
        int64_t now = now_ns();
        if (!window_started && now >= w_start) {
            window_started = true;
            for (int p = 0; p < o->n_pids; p++) cpu0[p] = proc_cpu_s(o->pids[p]);
            getrusage(RUSAGE_SELF, &ru0);
            proc_stat_busy(&busy0, &steal0);
        }
        if (window_started && !stopping &&
            ((now >= w_end && n_lat >= o->min_responses) || now >= w_hard || sent_total >= o->max_requests)) {
            stopping = true;
            stop_time = now;
            window_ns = now - w_start;
            for (int p = 0; p < o->n_pids; p++) cpu1[p] = proc_cpu_s(o->pids[p]);
            getrusage(RUSAGE_SELF, &ru1);
            proc_stat_busy(&busy1, &steal1);
        }
        if (stopping && (in_flight == 0 || now - stop_time > (int64_t)(o->drain * 1e9))) break;

        if (open_loop && !stopping) {
            while (next_due <= now && sent_total + (long)ring_len < o->max_requests) {
                if (ring_len == ring_cap) die("open loop backlog overflow");
                ring[(ring_head + ring_len) % ring_cap] = next_due;
                ring_len++;
                next_due = t0 + (int64_t)((double)(sent_total + (long)ring_len) * 1e9 / o->rate);
            }
            for (int i = 0; i < o->connections && ring_len > 0; i++)
                if (cs[i].state == C_IDLE) {
                    int64_t due = ring[ring_head];
                    ring_head = (ring_head + 1) % ring_cap;
                    ring_len--;
                    SEND(i, due);
                }
            if ((long)ring_len > backlog_max) backlog_max = (long)ring_len;
        }

        int timeout_ms = 50;
        if (open_loop && !stopping) {
            int64_t wait = next_due - now_ns();
            timeout_ms = wait <= 0 ? 0 : (int)((wait + 999999) / 1000000);
            if (timeout_ms > 50) timeout_ms = 50;
        }
        int n = epoll_wait(ep, evs, 256, timeout_ms);
        if (n < 0 && errno != EINTR) die("epoll_wait: %s", strerror(errno));
        for (int e = 0; e < n; e++) {
            int ci = (int)evs[e].data.u32;
            conn *c = &cs[ci];
            bool broken = false;
            if (c->state == C_WRITING) {
                while (c->sent < c->req_len) {
                    ssize_t w = send(c->fd, c->req + c->sent, c->req_len - c->sent, MSG_NOSIGNAL);
                    if (w > 0) c->sent += (size_t)w;
                    else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
                    else {
                        broken = true;
                        break;
                    }
                }
                if (!broken && c->sent == c->req_len) {
                    c->state = C_READING;
                    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)ci};
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                }
                /* an early answer (e.g. 413) arrives as EPOLLIN|EPOLLERR; read it below */
                if (!(evs[e].events & EPOLLIN) && !broken) continue;
            }
            int complete = 0;
            if (c->state == C_READING || (evs[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
                for (;;) {
                    if (c->cap - c->len < 65536) {
                        c->cap = c->cap ? c->cap * 2 : 262144;
                        c->buf = realloc(c->buf, c->cap);
                    }
                    ssize_t r = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
                    if (r > 0) {
                        size_t prev = c->len;
                        c->len += (size_t)r;
                        complete = parse_response(&c->rp, c->buf, c->len, prev);
                        if (complete != 0) break;
                    } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                        break;
                    } else {
                        if (r == 0 && c->rp.hdr_end && c->rp.close && c->rp.content_length < 0) complete = 1;
                        else broken = true;
                        break;
                    }
                }
                if (complete < 0) broken = true;
            }
            if (complete == 1) {
                int64_t t = now_ns();
                done_total++;
                in_flight--;
                bool ok = c->rp.status >= 200 && c->rp.status < 300;
                if (!ok) {
                    non2xx++;
                    if (!first_error[0]) {
                        size_t n_copy = c->len < sizeof first_error - 1 ? c->len : sizeof first_error - 1;
                        memcpy(first_error, c->buf, n_copy);
                        first_error[n_copy] = 0;
                    }
                }
                if (ok && window_started && !stopping && t >= w_start) {
                    if (n_lat == lat_cap) lat = realloc(lat, (size_t)(lat_cap *= 2) * sizeof *lat);
                    lat[n_lat++] = t - c->t_start;
                }
                c->state = C_IDLE;
                if (c->rp.close) broken = true; /* reconnect below, nothing in flight */
                else {
                    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)ci};
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                }
            }
            if (broken) {
                if (c->state != C_IDLE) {
                    errors++;
                    in_flight--;
                    if (!first_error[0]) snprintf(first_error, sizeof first_error, "connection lost: %s", strerror(errno));
                }
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                c->fd = connect_to(&addrs[ci % o->n_ports], true);
                if (c->fd < 0) die("reconnect 127.0.0.1:%d: %s", o->ports[ci % o->n_ports], strerror(errno));
                reconnects++;
                c->state = C_IDLE;
                struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)ci};
                epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
            }
            if (c->state == C_IDLE && !stopping) {
                if (!open_loop) {
                    if (sent_total < o->max_requests) SEND(ci, now_ns());
                } else if (ring_len > 0) {
                    int64_t due = ring[ring_head];
                    ring_head = (ring_head + 1) % ring_cap;
                    ring_len--;
                    SEND(ci, due);
                }
            }
        }
    }
    int64_t t_end = now_ns();
    long undrained = in_flight;
    for (int i = 0; i < o->connections; i++) {
        close(cs[i].fd);
        free(cs[i].buf);
    }

    qsort(lat, (size_t)n_lat, sizeof *lat, cmp_i64);
    double window_s = (double)window_ns / 1e9, sum = 0;
    for (long i = 0; i < n_lat; i++) sum += (double)lat[i];
    double server_cpu = 0;
    long hwm_sum = 0, rss_sum = 0;
    for (int p = 0; p < o->n_pids; p++) {
        if (cpu0[p] >= 0 && cpu1[p] >= 0) server_cpu += cpu1[p] - cpu0[p];
        long h = proc_status_kb(o->pids[p], "VmHWM"), r = proc_status_kb(o->pids[p], "VmRSS");
        if (h > 0) hwm_sum += h;
        if (r > 0) rss_sum += r;
    }
    double client_cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
                        (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
    double rps = window_s > 0 ? (double)n_lat / window_s : 0;
    /* CPU used by everything else on the machine during the window (other processes disturb the figures). */
    double machine_busy = busy0 >= 0 && busy1 >= 0 && window_s > 0 ? (busy1 - busy0) / window_s : -1;
    double other = machine_busy >= 0 ? machine_busy - (server_cpu + client_cpu) / window_s : -1;
    if (machine_busy >= 0 && other < 0) other = 0;

    printf("{\"label\":");
    json_str(o->label ? o->label : "");
    printf(",\"mode\":\"%s\",\"connections\":%d,\"rate_offered\":%.1f,\"items\":%d,\"bodies\":%d,\"body_bytes\":%.0f,"
           "\"window_s\":%.3f,\"requests\":%ld,\"sent_total\":%ld,\"errors\":%ld,\"non2xx\":%ld,\"reconnects\":%ld,"
           "\"undrained\":%ld,\"drain_s\":%.3f,\"backlog_max\":%ld,\"req_s\":%.2f,\"emb_s\":%.1f,"
           "\"lat_ms\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"p999\":%.3f,\"max\":%.3f,\"mean\":%.3f},"
           "\"server_cpu_s\":%.2f,\"server_cores\":%.3f,\"server_cpu_us_per_req\":%.1f,\"server_cpu_us_per_emb\":%.2f,"
           "\"server_rss_peak_kb\":%ld,\"server_rss_kb\":%ld,\"hwm_reset\":%s,\"client_cpu_s\":%.2f,\"client_cores\":%.3f,"
           "\"machine_busy_cores\":%.3f,\"other_cores\":%.3f,\"steal_cores\":%.3f,\"pids\":[",
           open_loop ? "open" : "closed", o->connections, o->rate, o->items, o->n_bodies, body_bytes, window_s, n_lat,
           sent_total, errors, non2xx, reconnects, undrained, (double)(t_end - stop_time) / 1e9, backlog_max, rps,
           rps * o->items, pct_ms(lat, n_lat, 0.50), pct_ms(lat, n_lat, 0.90), pct_ms(lat, n_lat, 0.99),
           pct_ms(lat, n_lat, 0.999), n_lat ? (double)lat[n_lat - 1] / 1e6 : 0, n_lat ? sum / (double)n_lat / 1e6 : 0,
           server_cpu, window_s > 0 ? server_cpu / window_s : 0, n_lat ? server_cpu * 1e6 / (double)n_lat : 0,
           n_lat && o->items ? server_cpu * 1e6 / ((double)n_lat * o->items) : 0, hwm_sum, rss_sum,
           hwm_reset ? "true" : "false", client_cpu, window_s > 0 ? client_cpu / window_s : 0, machine_busy, other,
           window_s > 0 ? (steal1 - steal0) / window_s : 0);
    for (int p = 0; p < o->n_pids; p++) printf("%s%d", p ? "," : "", o->pids[p]);
    printf("],\"first_error\":");
    json_str(first_error);
    printf("}\n");
    fflush(stdout);
    if (first_error[0]) fprintf(stderr, "loadgen: first error: %.300s\n", first_error);
    return 0;
}

/* ------------------------------------------------------------------ ready */

static int http_get_status(const struct sockaddr_in *a, const char *path) {
    int fd = connect_to(a, false);
    if (fd < 0) return -1;
    struct timeval tv = {.tv_sec = 2};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char req[512], buf[64];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    int status = -1;
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) == n) {
        ssize_t r = recv(fd, buf, sizeof buf - 1, 0);
        if (r >= 12) {
            buf[r] = 0;
            if (strncmp(buf, "HTTP/1.", 7) == 0) status = atoi(buf + 9);
        }
    }
    close(fd);
    return status;
}

static int cmd_ready(options *o, const char *log, char **argv) {
    struct sockaddr_in addr = server_addr(o->host, o->port);
    int probe = connect_to(&addr, false);
    if (probe >= 0) die("ready: something already listens on 127.0.0.1:%d", o->port);
    int64_t t0 = now_ns();
    pid_t pid = fork();
    if (pid < 0) die("fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(log ? log : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    int status = -1, polls = 0;
    int64_t deadline = t0 + (int64_t)(o->duration * 1e9);
    while (now_ns() < deadline) {
        polls++;
        status = http_get_status(&addr, o->path);
        if (status == 200) break;
        int ws;
        if (waitpid(pid, &ws, WNOHANG) == pid) die("ready: %s exited before %s answered 200", argv[0], o->path);
        usleep(1000);
    }
    int64_t t1 = now_ns();
    long rss = proc_status_kb(pid, "VmRSS"), hwm = proc_status_kb(pid, "VmHWM");
    kill(pid, SIGTERM);
    int ws = 0, exit_status = -1;
    for (int i = 0; i < 1500; i++) {
        if (waitpid(pid, &ws, WNOHANG) == pid) {
            exit_status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
            break;
        }
        usleep(10000);
    }
    if (exit_status < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &ws, 0);
        exit_status = 137;
    }
    printf("{\"ready\":%s,\"ready_ms\":%.2f,\"polls\":%d,\"rss_kb\":%ld,\"hwm_kb\":%ld,\"exit_status\":%d}\n",
           status == 200 ? "true" : "false", (double)(t1 - t0) / 1e6, polls, rss, hwm, exit_status);
    return status == 200 ? 0 : 1;
}

/* ------------------------------------------------------------------ main */

static void usage(void) {
    fprintf(stderr,
            "usage: loadgen run --port N [--port N ...] --body FILE [--body FILE ...] [--path P] [--header 'K: V'] [--connections N]\n"
            "                   [--warmup S] [--duration S] [--max-duration S] [--min-responses N] [--max-requests N]\n"
            "                   [--rate R] [--drain S] [--items N] [--pid PID ...] [--label TEXT] [--host 127.0.0.1]\n"
            "       loadgen ready --port N [--path /readyz] [--timeout S] [--log FILE] -- CMD ARG...\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 2) usage();
    signal(SIGPIPE, SIG_IGN);
    options o = {.host = "127.0.0.1", .path = NULL, .connections = 1, .items = 1, .warmup = 1, .duration = 5,
                 .max_duration = -1, .drain = 30, .max_requests = 10000000, .min_responses = 0};
    const char *log = NULL;
    bool ready = strcmp(argv[1], "ready") == 0;
    if (!ready && strcmp(argv[1], "run") != 0) usage();
    if (ready) o.duration = 30;
    int i = 2;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (i + 1 >= argc) usage();
        const char *v = argv[++i];
        if (!strcmp(a, "--port")) {
            if (o.n_ports == MAX_PORTS) die("at most %d --port", MAX_PORTS);
            o.ports[o.n_ports++] = atoi(v);
            o.port = o.ports[0];
            if (o.ports[o.n_ports - 1] <= 0 || o.ports[o.n_ports - 1] > 65535) die("--port %s is not a port", v);
        }
        else if (!strcmp(a, "--host")) o.host = v;
        else if (!strcmp(a, "--path")) o.path = v;
        else if (!strcmp(a, "--label")) o.label = v;
        else if (!strcmp(a, "--connections")) o.connections = atoi(v);
        else if (!strcmp(a, "--items")) o.items = atoi(v);
        else if (!strcmp(a, "--warmup")) o.warmup = atof(v);
        else if (!strcmp(a, "--duration") || !strcmp(a, "--timeout")) o.duration = atof(v);
        else if (!strcmp(a, "--max-duration")) o.max_duration = atof(v);
        else if (!strcmp(a, "--drain")) o.drain = atof(v);
        else if (!strcmp(a, "--rate")) o.rate = atof(v);
        else if (!strcmp(a, "--max-requests")) o.max_requests = atol(v);
        else if (!strcmp(a, "--min-responses")) o.min_responses = atol(v);
        else if (!strcmp(a, "--log")) log = v;
        else if (!strcmp(a, "--body")) {
            if (o.n_bodies == MAX_BODIES) die("at most %d --body", MAX_BODIES);
            o.bodies[o.n_bodies++] = v;
        } else if (!strcmp(a, "--header")) {
            if (o.n_headers == MAX_HEADERS) die("at most %d --header", MAX_HEADERS);
            o.headers[o.n_headers++] = v;
        } else if (!strcmp(a, "--pid")) {
            if (o.n_pids == MAX_PIDS) die("at most %d --pid", MAX_PIDS);
            o.pids[o.n_pids++] = atoi(v);
        } else usage();
    }
    if (o.port <= 0 || o.port > 65535) die("--port is required");
    if (ready) {
        if (!o.path) o.path = "/readyz";
        if (i >= argc) usage();
        return cmd_ready(&o, log, argv + i);
    }
    if (!o.path) o.path = "/v1/score";
    if (o.max_duration < o.duration) o.max_duration = o.duration * 3;
    return cmd_run(&o);
}
