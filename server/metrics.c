/* Prometheus metrics; see metrics.h. */
#include "metrics.h"

#include <dirent.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "witness.h"
#include "build_commit.h" /* PGCLD_BUILD_COMMIT, by meson's vcs_tag (server/meson.build) */

static const double g_latency_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                          0.1,    0.25,  0.5,    1,     2.5,  5,     10};
#define N_LAT ((int)(sizeof g_latency_bounds / sizeof g_latency_bounds[0]))
static const double g_batch_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096};
#define N_BATCH ((int)(sizeof g_batch_bounds / sizeof g_batch_bounds[0]))
/* The statuses counted by name: pgcld's own, and those libmicrohttpd sends itself (414, 431, 505);
 * any other is counted as "other". Column N_STATUS counts requests that got no answer. */
static const int g_statuses[] = {200, 201, 400, 401, 403, 404, 405, 409, 413, 414, 415,
                                 422, 429, 431, 500, 501, 503, 505};
#define N_STATUS ((int)(sizeof g_statuses / sizeof g_statuses[0]))
#define STATUS_OTHER N_STATUS
#define STATUS_UNANSWERED (N_STATUS + 1)
#define N_STATUS_COLUMNS (N_STATUS + 2)
static const char *const g_unanswered_names[] = {"request_timeout", "connection_timeout", "client_closed", "shutdown",
                                                 "error"};
_Static_assert(sizeof g_unanswered_names / sizeof g_unanswered_names[0] == PGCLD_N_UNANSWERED, "a name for every reason");

const char *pgcld_unanswered_reason_str(pgcld_unanswered_reason reason) {
    return reason >= 0 && reason < PGCLD_N_UNANSWERED ? g_unanswered_names[reason] : "error";
}
static const char *const g_stage_names[] = {"queue", "compute", "audit", "total"};
static const char *const g_reject_names[] = {"rate_limited", "overloaded", "request_timeout", "connection_limit"};
_Static_assert(sizeof g_reject_names / sizeof g_reject_names[0] == PGCLD_N_REJECT, "a name for every reason");

typedef struct histogram {
    _Atomic unsigned long long buckets[16]; /* cumulative counts are computed at render time */
    _Atomic unsigned long long count;
    _Atomic unsigned long long sum_ns;      /* sum in nanoseconds (latency) or items (batch) */
} histogram;

/* One labelled counter series: model[, version][, kind]. */
typedef struct series {
    char model[65], version[65], kind[16];
    unsigned long long value;
    struct series *next;
} series;

struct pgcld_metrics {
    const char *const *route_names;
    int n_routes;
    _Atomic unsigned long long *requests; /* (n_routes + 1) × N_STATUS_COLUMNS; last route = unmatched */
    _Atomic unsigned long long unanswered[PGCLD_N_UNANSWERED];
    histogram stages[PGCLD_N_STAGES];
    histogram batch;
    histogram forward_rows;
    _Atomic unsigned long long rejected[PGCLD_N_REJECT];
    _Atomic unsigned long long inputs_dropped; /* stored inputs dropped by input retention */
    pthread_mutex_t lock;                 /* guards the series lists */
    series *scored, *swaps, *shadow;
    series *calls; /* pgcld_metrics_model_call's counters, kind = the counter's name */
};

pgcld_metrics *pgcld_metrics_create(const char *const *route_names, int n_routes) {
    pgcld_metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->route_names = route_names;
    m->n_routes = n_routes;
    m->requests = calloc((size_t)(n_routes + 1) * N_STATUS_COLUMNS, sizeof *m->requests);
    if (!m->requests) {
        free(m);
        return NULL;
    }
    pthread_mutex_init(&m->lock, NULL);
    return m;
}

static void free_series(series *s) {
    while (s) {
        series *next = s->next;
        free(s);
        s = next;
    }
}

void pgcld_metrics_destroy(pgcld_metrics *m) {
    if (!m) return;
    free_series(m->scored);
    free_series(m->swaps);
    free_series(m->shadow);
    free_series(m->calls);
    free(m->requests);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static int route_row(const pgcld_metrics *m, int route) {
    return route < 0 || route >= m->n_routes ? m->n_routes : route;
}

void pgcld_metrics_request(pgcld_metrics *m, int route, int status) {
    if (!m) return;
    int s = STATUS_OTHER;
    for (int i = 0; i < N_STATUS; i++)
        if (g_statuses[i] == status) s = i;
    atomic_fetch_add_explicit(&m->requests[route_row(m, route) * N_STATUS_COLUMNS + s], 1, memory_order_relaxed);
}

void pgcld_metrics_unanswered(pgcld_metrics *m, int route, pgcld_unanswered_reason reason) {
    if (!m || reason >= PGCLD_N_UNANSWERED) return;
    atomic_fetch_add_explicit(&m->requests[route_row(m, route) * N_STATUS_COLUMNS + STATUS_UNANSWERED], 1,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&m->unanswered[reason], 1, memory_order_relaxed);
}

void pgcld_metrics_inputs_dropped(int64_t n, void *metrics) {
    pgcld_metrics *m = metrics;
    if (m && n > 0) atomic_fetch_add_explicit(&m->inputs_dropped, (unsigned long long)n, memory_order_relaxed);
}

void pgcld_metrics_rejected(pgcld_metrics *m, pgcld_reject_reason reason) {
    if (m && reason < PGCLD_N_REJECT) atomic_fetch_add_explicit(&m->rejected[reason], 1, memory_order_relaxed);
}

static void observe(histogram *h, const double *bounds, int n, double value, unsigned long long sum_units) {
    int b = n;
    for (int i = 0; i < n; i++) {
        if (value <= bounds[i]) {
            b = i;
            break;
        }
    }
    atomic_fetch_add_explicit(&h->buckets[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, sum_units, memory_order_relaxed);
}

void pgcld_metrics_stage(pgcld_metrics *m, pgcld_stage stage, double seconds) {
    if (m) observe(&m->stages[stage], g_latency_bounds, N_LAT, seconds, (unsigned long long)(seconds * 1e9));
}

void pgcld_metrics_batch(pgcld_metrics *m, int items) {
    if (m) observe(&m->batch, g_batch_bounds, N_BATCH, items, (unsigned long long)items);
}

void pgcld_metrics_forward_rows(pgcld_metrics *m, int rows) {
    if (m) observe(&m->forward_rows, g_batch_bounds, N_BATCH, rows, (unsigned long long)rows);
}

/* The series (model, version, kind) of list, created when absent; NULL when out of memory. Under
 * m->lock. */
static series *find_series(series **list, const char *model, const char *version, const char *kind, bool create) {
    series *s = *list;
    while (s && !(strcmp(s->model, model) == 0 && strcmp(s->version, version) == 0 && strcmp(s->kind, kind) == 0))
        s = s->next;
    if (!s && create && (s = calloc(1, sizeof *s))) {
        snprintf(s->model, sizeof s->model, "%s", model);
        snprintf(s->version, sizeof s->version, "%s", version);
        snprintf(s->kind, sizeof s->kind, "%s", kind);
        s->next = *list;
        *list = s;
    }
    return s;
}

void pgcld_metrics_model_call(pgcld_metrics *m, const char *model, const char *version, bool ok, int64_t total_ns,
                              bool computed, int64_t queue_ns, int64_t compute_ns) {
    if (!m) return;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    const struct { const char *kind; unsigned long long by; bool counted; } adds[] = {
        {ok ? "success" : "fail", 1, true},
        {ok ? "success_ns" : "fail_ns", (unsigned long long)(total_ns > 0 ? total_ns : 0), true},
        {"executions", 1, computed},
        {"queue_ns", (unsigned long long)(queue_ns > 0 ? queue_ns : 0), computed},
        {"compute_ns", (unsigned long long)(compute_ns > 0 ? compute_ns : 0), computed},
    };
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < sizeof adds / sizeof adds[0]; i++) {
        series *s = adds[i].counted ? find_series(&m->calls, model, version, adds[i].kind, true) : NULL;
        if (s) s->value += adds[i].by;
    }
    series *last = find_series(&m->calls, model, version, "last_ms", true);
    if (last) last->value = (unsigned long long)now.tv_sec * 1000ull + (unsigned long long)now.tv_nsec / 1000000ull;
    pthread_mutex_unlock(&m->lock);
}

void pgcld_metrics_model_stats(pgcld_metrics *m, const char *model, const char *version, pgcld_model_stats *out) {
    *out = (pgcld_model_stats){0};
    if (!m) return;
    struct { const char *kind; unsigned long long *to; } reads[] = {
        {"executions", &out->executions}, {"success", &out->success}, {"success_ns", &out->success_ns},
        {"fail", &out->fail},             {"fail_ns", &out->fail_ns}, {"queue_ns", &out->queue_ns},
        {"compute_ns", &out->compute_ns}, {"last_ms", &out->last_ms},
    };
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
        series *s = find_series(&m->calls, model, version, reads[i].kind, false);
        *reads[i].to = s ? s->value : 0;
    }
    series *items = find_series(&m->scored, model, version, "", false);
    out->items = items ? items->value : 0;
    pthread_mutex_unlock(&m->lock);
}

static void bump(pgcld_metrics *m, series **list, const char *model, const char *version, const char *kind,
                 unsigned long long by) {
    pthread_mutex_lock(&m->lock);
    series *s = *list;
    while (s && !(strcmp(s->model, model) == 0 && strcmp(s->version, version) == 0 && strcmp(s->kind, kind) == 0))
        s = s->next;
    if (!s && (s = calloc(1, sizeof *s))) {
        snprintf(s->model, sizeof s->model, "%s", model);
        snprintf(s->version, sizeof s->version, "%s", version);
        snprintf(s->kind, sizeof s->kind, "%s", kind);
        s->next = *list;
        *list = s;
    }
    if (s) s->value += by;
    pthread_mutex_unlock(&m->lock);
}

void pgcld_metrics_scored(pgcld_metrics *m, const char *model, const char *version, int items) {
    if (m) bump(m, &m->scored, model, version, "", (unsigned long long)items);
}

void pgcld_metrics_swap(pgcld_metrics *m, const char *model, bool ok) {
    if (m) bump(m, &m->swaps, model, "", ok ? "ok" : "failed", 1);
}

void pgcld_metrics_shadow(pgcld_metrics *m, const char *model, bool dropped, int items) {
    if (m) bump(m, &m->shadow, model, "", dropped ? "dropped" : "scored", (unsigned long long)items);
}

void pgcld_metrics_shadow_observer(void *metrics, const char *model, bool dropped, int items) {
    pgcld_metrics_shadow(metrics, model, dropped, items);
}

/* ---- rendering ---- */

typedef struct text {
    char *p;
    size_t len, cap;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (t->p && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap * 2 : 8192;
        while (cap < t->len + (size_t)n + 1) cap *= 2;
        char *grown = realloc(t->p, cap);
        if (!grown) return;
        t->p = grown;
        t->cap = cap;
    }
}

static void put_histogram(text *t, const char *name, const char *labels, const histogram *h, const double *bounds,
                          int n, double sum_scale) {
    unsigned long long cum = 0;
    for (int i = 0; i <= n; i++) {
        cum += atomic_load_explicit(&h->buckets[i], memory_order_relaxed);
        if (i < n) put(t, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, *labels ? "," : "", bounds[i], cum);
        else put(t, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, *labels ? "," : "", cum);
    }
    put(t, "%s_sum%s%s%s %.9g\n", name, *labels ? "{" : "", labels, *labels ? "}" : "",
        (double)atomic_load_explicit(&h->sum_ns, memory_order_relaxed) * sum_scale);
    put(t, "%s_count%s%s%s %llu\n", name, *labels ? "{" : "", labels, *labels ? "}" : "",
        (unsigned long long)atomic_load_explicit(&h->count, memory_order_relaxed));
}

/* The audit database's size (when its store can tell) and the time of its last commit (once there
 * was one): the series is left out rather than shown as 0, which would read as 1970. */
static void put_audit_store(text *t, const pgcld_metrics_gauges *g) {
    put(t, "# HELP pgcld_audit_db_size_bytes Bytes the audit database takes on disk (SQLite: the database file and its"
           " -wal; not reported for PostgreSQL).\n# TYPE pgcld_audit_db_size_bytes gauge\n");
    if (g->audit_db_bytes >= 0) put(t, "pgcld_audit_db_size_bytes %lld\n", g->audit_db_bytes);
    put(t, "# HELP pgcld_audit_last_commit_timestamp_seconds Unix time of the audit writer's last committed"
           " transaction (absent until the first one since start).\n"
           "# TYPE pgcld_audit_last_commit_timestamp_seconds gauge\n");
    if (g->audit_last_commit_unix_us > 0)
        put(t, "pgcld_audit_last_commit_timestamp_seconds %.6f\n", (double)g->audit_last_commit_unix_us / 1e6);
}

/* ---- the process metrics, named and described as Prometheus' client libraries do ----
 * Read from /proc/self at each scrape (Linux only; elsewhere the families are left out). */

#ifdef __linux__
/* The fields of /proc/self/stat that the process metrics need (proc(5)). */
typedef struct proc_stat {
    unsigned long long utime_ticks, stime_ticks, start_ticks; /* fields 14, 15 and 22 */
    unsigned long long vsize_bytes;                           /* field 23 */
    long long rss_pages;                                      /* field 24 */
} proc_stat;

static bool read_proc_stat(proc_stat *out) {
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* the command name (field 2) is in parentheses and may hold spaces: fields 3… follow the last ')' */
    const char *p = strrchr(buf, ')');
    if (!p) return false;
    return sscanf(p + 1,
                  " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %llu %llu %lld",
                  &out->utime_ticks, &out->stime_ticks, &out->start_ticks, &out->vsize_bytes, &out->rss_pages) == 5;
}

/* The boot time (unix seconds), the "btime" line of /proc/stat; 0 when unreadable. */
static long long boot_time_unix(void) {
    char line[256];
    long long btime = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "btime %lld", &btime) == 1) break;
    fclose(f);
    return btime;
}

/* Open file descriptors: the entries of /proc/self/fd, less the one reading it; -1 when unreadable. */
static long long open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    long long n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d)) n++;
    closedir(d);
    return n;
}

static void put_process(text *t) {
    proc_stat st;
    long ticks_per_s = sysconf(_SC_CLK_TCK), page_bytes = sysconf(_SC_PAGESIZE);
    if (read_proc_stat(&st) && ticks_per_s > 0 && page_bytes > 0) {
        put(t, "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
               "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.2f\n",
            (double)(st.utime_ticks + st.stime_ticks) / (double)ticks_per_s);
        put(t, "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
               "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes %llu\n", st.vsize_bytes);
        put(t, "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
               "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %lld\n",
            st.rss_pages * (long long)page_bytes);
        long long boot = boot_time_unix();
        if (boot > 0)
            put(t, "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n"
                   "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %.2f\n",
                (double)boot + (double)st.start_ticks / (double)ticks_per_s);
    }
    long long fds = open_fds();
    if (fds >= 0)
        put(t, "# HELP process_open_fds Number of open file descriptors.\n# TYPE process_open_fds gauge\n"
               "process_open_fds %lld\n", fds);
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
        put(t, "# HELP process_max_fds Maximum number of open file descriptors.\n# TYPE process_max_fds gauge\n"
               "process_max_fds %llu\n", (unsigned long long)lim.rlim_cur);
}
#else
static void put_process(text *t) { (void)t; }
#endif

/* The witnesses' families (--witness), one series per witness: what it cosigned, how often it
 * failed, how often it held a tree this log's checkpoint does not extend (a possible split view),
 * and the outcome of its last exchange. */
static void put_witnesses(text *t, const pgcld_metrics_gauges *g) {
    if (g->n_witnesses <= 0) return;
    put(t, "# HELP pgcld_witness_cosigned_tree_size The size of the latest checkpoint of this writer's log that the "
           "witness cosigned (0: none known).\n# TYPE pgcld_witness_cosigned_tree_size gauge\n");
    for (int i = 0; i < g->n_witnesses; i++)
        put(t, "pgcld_witness_cosigned_tree_size{witness=\"%s\"} %llu\n", g->witnesses[i].name,
            (unsigned long long)g->witnesses[i].cosigned_size);
    put(t, "# HELP pgcld_witness_pending_tree_size The size of the checkpoint waiting for the witness (0: up to "
           "date).\n# TYPE pgcld_witness_pending_tree_size gauge\n");
    for (int i = 0; i < g->n_witnesses; i++)
        put(t, "pgcld_witness_pending_tree_size{witness=\"%s\"} %llu\n", g->witnesses[i].name,
            (unsigned long long)g->witnesses[i].pending_size);
    put(t, "# HELP pgcld_witness_cosignatures_total Cosignatures received from the witness since start.\n"
           "# TYPE pgcld_witness_cosignatures_total counter\n");
    for (int i = 0; i < g->n_witnesses; i++)
        put(t, "pgcld_witness_cosignatures_total{witness=\"%s\"} %llu\n", g->witnesses[i].name,
            (unsigned long long)g->witnesses[i].cosignatures);
    put(t, "# HELP pgcld_witness_failures_total Exchanges with the witness that brought no cosignature (down, "
           "refused, a conflict), since start; each is retried after a backoff.\n"
           "# TYPE pgcld_witness_failures_total counter\n");
    for (int i = 0; i < g->n_witnesses; i++)
        put(t, "pgcld_witness_failures_total{witness=\"%s\"} %llu\n", g->witnesses[i].name,
            (unsigned long long)g->witnesses[i].failures);
    put(t, "# HELP pgcld_witness_conflicts_total Failures where the witness holds a tree this log's checkpoint does "
           "not extend: a split view (or a stale checkpoint); investigate.\n"
           "# TYPE pgcld_witness_conflicts_total counter\n");
    for (int i = 0; i < g->n_witnesses; i++)
        put(t, "pgcld_witness_conflicts_total{witness=\"%s\"} %llu\n", g->witnesses[i].name,
            (unsigned long long)g->witnesses[i].conflicts);
    put(t, "# HELP pgcld_witness_last_outcome The outcome of the witness's last exchange (none, cosigned, conflict, "
           "bad_proof, refused, unreachable, bad_answer, no_proof), as a label of a series of value 1.\n"
           "# TYPE pgcld_witness_last_outcome gauge\n");
    for (int i = 0; i < g->n_witnesses; i++)
        put(t, "pgcld_witness_last_outcome{witness=\"%s\",outcome=\"%s\"} 1\n", g->witnesses[i].name,
            pgcl_witness_outcome_str(g->witnesses[i].last_outcome));
}

char *pgcld_metrics_render(pgcld_metrics *m, const pgcld_metrics_gauges *g, const char *extra) {
    text t = {0};
    put(&t, "# HELP pgcld_requests_total HTTP requests by route and the status code of the answer sent"
            " (code=\"unanswered\": none was sent, see pgcld_requests_unanswered_total).\n"
            "# TYPE pgcld_requests_total counter\n");
    for (int r = 0; r <= m->n_routes; r++) {
        for (int s = 0; s < N_STATUS_COLUMNS; s++) {
            unsigned long long v = atomic_load_explicit(&m->requests[r * N_STATUS_COLUMNS + s], memory_order_relaxed);
            if (!v) continue;
            char code[16];
            if (s < N_STATUS) snprintf(code, sizeof code, "%d", g_statuses[s]);
            else snprintf(code, sizeof code, "%s", s == STATUS_OTHER ? "other" : "unanswered");
            put(&t, "pgcld_requests_total{route=\"%s\",code=\"%s\"} %llu\n",
                r < m->n_routes ? m->route_names[r] : "unmatched", code, v);
        }
    }
    put(&t, "# HELP pgcld_requests_unanswered_total Requests that ended with no answer sent, by reason: request_timeout"
            " (cut, --request-timeout), connection_timeout (idle, --connection-timeout), client_closed, shutdown"
            " (--shutdown-grace ran out), error.\n# TYPE pgcld_requests_unanswered_total counter\n");
    for (int r = 0; r < PGCLD_N_UNANSWERED; r++)
        put(&t, "pgcld_requests_unanswered_total{reason=\"%s\"} %llu\n", g_unanswered_names[r],
            (unsigned long long)atomic_load_explicit(&m->unanswered[r], memory_order_relaxed));
    put(&t, "# HELP pgcld_rejected_total Requests refused by overload protection: rate_limited (429, --rate-limit-rps),"
            " overloaded (503, --max-score-in-flight), request_timeout (connection closed, --request-timeout),"
            " connection_limit (new connection closed unanswered, --max-connections).\n"
            "# TYPE pgcld_rejected_total counter\n");
    for (int r = 0; r < PGCLD_N_REJECT; r++)
        put(&t, "pgcld_rejected_total{reason=\"%s\"} %llu\n", g_reject_names[r],
            (unsigned long long)atomic_load_explicit(&m->rejected[r], memory_order_relaxed));
    put(&t, "# HELP pgcld_inputs_dropped_total Stored inputs dropped after --input-retention-days (the decisions,"
            " their proofs and the chain stay).\n# TYPE pgcld_inputs_dropped_total counter\npgcld_inputs_dropped_total %llu\n",
        (unsigned long long)atomic_load_explicit(&m->inputs_dropped, memory_order_relaxed));
    put(&t, "# HELP pgcld_request_duration_seconds Latency of scoring requests (/v1/score, /v2 infer) by stage (queue: waiting for a compute slot;"
            " compute: forward pass; audit: commit of the rows; total: arrival to answer).\n"
            "# TYPE pgcld_request_duration_seconds histogram\n");
    for (int s = 0; s < PGCLD_N_STAGES; s++) {
        char labels[32];
        snprintf(labels, sizeof labels, "stage=\"%s\"", g_stage_names[s]);
        put_histogram(&t, "pgcld_request_duration_seconds", labels, &m->stages[s], g_latency_bounds, N_LAT, 1e-9);
    }
    put(&t, "# HELP pgcld_batch_items Items per scoring request (/v1/score, /v2 infer).\n# TYPE pgcld_batch_items histogram\n");
    put_histogram(&t, "pgcld_batch_items", "", &m->batch, g_batch_bounds, N_BATCH, 1.0);
    put(&t, "# HELP pgcld_forward_batch_rows Rows of the forward pass each /v1/score request ran in (cross-request"
            " batching puts several requests in one).\n# TYPE pgcld_forward_batch_rows histogram\n");
    put_histogram(&t, "pgcld_forward_batch_rows", "", &m->forward_rows, g_batch_bounds, N_BATCH, 1.0);
    pthread_mutex_lock(&m->lock);
    put(&t, "# HELP pgcld_items_scored_total Items scored, by model and version.\n"
            "# TYPE pgcld_items_scored_total counter\n");
    for (series *s = m->scored; s; s = s->next)
        put(&t, "pgcld_items_scored_total{model=\"%s\",version=\"%s\"} %llu\n", s->model, s->version, s->value);
    put(&t, "# HELP pgcld_model_swaps_total Activations by model and result (failed: the load was refused).\n"
            "# TYPE pgcld_model_swaps_total counter\n");
    for (series *s = m->swaps; s; s = s->next)
        put(&t, "pgcld_model_swaps_total{model=\"%s\",result=\"%s\"} %llu\n", s->model, s->kind, s->value);
    put(&t, "# HELP pgcld_shadow_items_total Items scored by shadow candidates, or dropped because the shadow queue"
            " was full.\n# TYPE pgcld_shadow_items_total counter\n");
    for (series *s = m->shadow; s; s = s->next)
        put(&t, "pgcld_shadow_items_total{model=\"%s\",result=\"%s\"} %llu\n", s->model, s->kind, s->value);
    pthread_mutex_unlock(&m->lock);
    put(&t, "# HELP pgcld_audit_queue_rows Rows waiting for the audit writer.\n# TYPE pgcld_audit_queue_rows gauge\n"
            "pgcld_audit_queue_rows %d\n", g->audit_pending_rows);
    put(&t, "# HELP pgcld_in_flight_requests Requests being served.\n# TYPE pgcld_in_flight_requests gauge\n"
            "pgcld_in_flight_requests %d\n", g->in_flight);
    put(&t, "# HELP pgcld_open_connections Client connections accepted and not yet closed (--max-connections).\n"
            "# TYPE pgcld_open_connections gauge\npgcld_open_connections %d\n", g->open_connections);
    put(&t, "# HELP pgcld_body_bytes_reserved Bytes of scoring request bodies held in memory (--max-body-memory).\n"
            "# TYPE pgcld_body_bytes_reserved gauge\npgcld_body_bytes_reserved %lld\n", g->body_bytes_reserved);
    put(&t, "# HELP pgcld_body_waiting_requests Scoring requests waiting, unread, for --max-body-memory.\n"
            "# TYPE pgcld_body_waiting_requests gauge\npgcld_body_waiting_requests %d\n", g->body_waiting);
    put(&t, "# HELP pgcld_models_ready Models with an active version.\n# TYPE pgcld_models_ready gauge\n"
            "pgcld_models_ready %d\n", g->models_ready);
    put(&t, "# HELP pgcld_draining 1 while shutting down.\n# TYPE pgcld_draining gauge\npgcld_draining %d\n",
        g->draining ? 1 : 0);
    put_audit_store(&t, g);
    put_witnesses(&t, g);
    put(&t, "# HELP pgcld_build_info The version of pgcld and the git commit it was built from (\"unknown\": not"
            " built from a git checkout).\n# TYPE pgcld_build_info gauge\n"
            "pgcld_build_info{version=\"%s\",commit=\"%s\"} 1\n", PGCLD_VERSION, PGCLD_BUILD_COMMIT);
    put_process(&t);
    put(&t, "# HELP pgcld_model_active_info The active version of each model.\n# TYPE pgcld_model_active_info gauge\n");
    if (extra) put(&t, "%s", extra);
    return t.p;
}
