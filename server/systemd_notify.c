/* The systemd notifier: READY=1, RELOADING=1, STOPPING=1, STATUS= and WATCHDOG=1 through
 * sd_notify(3); see systemd_notify.h for what is sent when.
 *
 * One thread, started before the models load, feeds the watchdog and refreshes STATUS=; it also
 * sends the first READY=1 when readiness comes after start-up (a model activated later, an audit
 * store that recovers). The main thread sends the messages of its own transitions (start-up done,
 * reload, drain) at once. `lock` orders every state message (READY, RELOADING, STOPPING, STATUS),
 * so the manager never sees a READY=1 of the thread after the main thread's STOPPING=1; it is never
 * held while the store is asked about its writer, which may block on purpose (audit.h). */
#include "systemd_notify.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PGCLD_HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "clock.h"
#include "log.h"

#define STATUS_CAP 1024        /* STATUS= text; a longer model list ends with "..." */
#define READY_POLL_US 100000   /* until the first READY=1: how often readiness is looked at */
#define STATUS_POLL_US 1000000 /* after it: how often STATUS= is recomposed (sent when it changed) */

struct pgcld_notifier {
    pgcld_server *srv;
    int64_t watchdog_us; /* WatchdogSec as $WATCHDOG_USEC gives it; 0: no watchdog */
    pthread_t thread;
    pthread_mutex_t lock; /* the flags below, and the order of the state messages */
    pthread_cond_t wake;  /* on pgcl_monotonic_us's clock */
    bool started;         /* start-up done (pgcld_notifier_started) */
    bool ready_sent;      /* the first READY=1 went out */
    bool reloading;       /* between RELOADING=1 and its READY=1 */
    bool stopping;        /* STOPPING=1 went out */
    bool closing;         /* the thread is asked to end */
    char last_status[STATUS_CAP]; /* the STATUS= text last sent; under lock */
    _Atomic int64_t withheld_stall_us; /* the writer's stall while pings are withheld; 0: they are not */
    _Atomic bool send_failure_logged;
};

/* One datagram to $NOTIFY_SOCKET (sd_notify: no-op without it). A failure is logged once: the
 * service manager may be gone, and pgcld serves on. */
static void send_notification(pgcld_notifier *n, const char *message) {
#ifdef PGCLD_HAVE_LIBSYSTEMD
    int rc = sd_notify(0, message);
    if (rc < 0 && !atomic_exchange(&n->send_failure_logged, true))
        pgcl_log_warn("systemd: cannot notify the service manager: %s (message '%.40s'); further failures are "
                      "not logged",
                      strerror(-rc), message);
#else
    (void)n, (void)message;
#endif
}

/* ---- STATUS= ---- */

typedef struct status_text {
    char text[STATUS_CAP];
    size_t len;
    int n_models;
} status_text;

static void status_appendf(status_text *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void status_appendf(status_text *s, const char *fmt, ...) {
    if (s->len >= sizeof s->text - 1) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(s->text + s->len, sizeof s->text - s->len, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    s->len += (size_t)n < sizeof s->text - s->len ? (size_t)n : sizeof s->text - 1 - s->len;
    if (s->len == sizeof s->text - 1) memcpy(s->text + s->len - 3, "...", 3);
}

static void status_append_model(const pgcl_model *m, void *ctx) {
    status_text *s = ctx;
    status_appendf(s, "%s%s/%s", s->n_models++ ? ", " : "", m->name, m->version);
}

/* What `systemctl status pgcld` shows: "serving toxicity/1, emotions/2; audit queue 0 rows", or
 * the phase and why /readyz says 503, and a withheld watchdog. */
static void compose_status(pgcld_notifier *n, bool started, bool stopping, status_text *s) {
    *s = (status_text){0};
    bool models, audit, draining;
    bool ready = pgcld_server_readiness(n->srv, &models, &audit, &draining);
    if (stopping || draining) {
        status_appendf(s, "draining");
    } else if (!started) {
        status_appendf(s, "starting: loading models");
    } else if (ready) {
        status_appendf(s, "serving ");
        pgcl_registry_foreach_active(n->srv->registry, status_append_model, s);
    } else {
        status_appendf(s, "not ready:%s%s", models ? "" : " no model serves", audit ? "" : " audit writes failing");
    }
    status_appendf(s, "; audit queue %d rows", pgcl_audit_pending_rows(n->srv->audit));
    int64_t stall = atomic_load(&n->withheld_stall_us);
    if (stall) status_appendf(s, "; audit writer stalled %.1f s, watchdog withheld", (double)stall / 1e6);
}

/* Sends "FIELDS\nSTATUS=text" (FIELDS may be empty) and remembers the text; caller holds lock. */
static void send_with_status_locked(pgcld_notifier *n, const char *fields, const status_text *s) {
    char message[STATUS_CAP + 128];
    snprintf(message, sizeof message, "%s%sSTATUS=%s", fields, *fields ? "\n" : "", s->text);
    send_notification(n, message);
    snprintf(n->last_status, sizeof n->last_status, "%s", s->text);
}

/* Sends the first READY=1 if start-up is done, /readyz would answer 200 and no reload or drain is
 * under way; caller holds lock. ready was read without it (the store may block). */
static void send_first_ready_locked(pgcld_notifier *n, bool ready, const status_text *s) {
    if (n->ready_sent || !n->started || n->reloading || n->stopping || !ready) return;
    send_with_status_locked(n, "READY=1", s);
    n->ready_sent = true;
    pgcl_log_info("systemd: READY=1 (%s)", s->text);
}

/* ---- the thread ---- */

/* A ping, if the audit writer is alive: it has owed progress for less than half WatchdogSec. The
 * store's answer may block (a writer holding its queue lock): then no ping goes out either. */
static void feed_watchdog(pgcld_notifier *n, int64_t now_us) {
    int64_t stall = pgcl_audit_writer_stall_us(n->srv->audit, now_us), limit = n->watchdog_us / 2;
    bool was_withheld = atomic_load(&n->withheld_stall_us) != 0;
    if (stall < limit) {
        atomic_store(&n->withheld_stall_us, 0);
        if (was_withheld) pgcl_log_info("systemd: the audit writer makes progress again; watchdog pings resume");
        send_notification(n, "WATCHDOG=1");
        return;
    }
    atomic_store(&n->withheld_stall_us, stall);
    if (!was_withheld)
        pgcl_log_error("systemd: watchdog ping withheld: the audit writer has owed progress for %.1f s (limit %.1f s, "
                       "half of WatchdogSec); systemd ends pgcld if this lasts WatchdogSec",
                       (double)stall / 1e6, (double)limit / 1e6);
}

/* Readiness and STATUS=: the first READY=1 when it is due, the status text when it changed. */
static void look(pgcld_notifier *n) {
    pthread_mutex_lock(&n->lock);
    bool started = n->started, stopping = n->stopping;
    pthread_mutex_unlock(&n->lock);
    bool models, audit, draining;
    bool ready = pgcld_server_readiness(n->srv, &models, &audit, &draining);
    status_text s;
    compose_status(n, started, stopping, &s);
    pthread_mutex_lock(&n->lock);
    send_first_ready_locked(n, ready, &s);
    if (strcmp(s.text, n->last_status) != 0 && !n->reloading) send_with_status_locked(n, "", &s);
    pthread_mutex_unlock(&n->lock);
}

static void *notifier_main(void *arg) {
    pgcld_notifier *n = arg;
    int64_t next_ping = pgcl_monotonic_us(), next_look = next_ping; /* the first of each at once */
    pthread_mutex_lock(&n->lock);
    while (!n->closing) {
        pthread_mutex_unlock(&n->lock);
        int64_t now = pgcl_monotonic_us();
        if (n->watchdog_us && now >= next_ping) {
            feed_watchdog(n, now);
            next_ping = now + n->watchdog_us / 2;
        }
        if (now >= next_look) look(n);
        pthread_mutex_lock(&n->lock);
        if (now >= next_look) next_look = now + (n->ready_sent ? STATUS_POLL_US : READY_POLL_US);
        int64_t wake_at = n->watchdog_us && next_ping < next_look ? next_ping : next_look;
        struct timespec until = pgcl_monotonic_timespec(wake_at);
        if (!n->closing) pthread_cond_timedwait(&n->wake, &n->lock, &until);
    }
    pthread_mutex_unlock(&n->lock);
    return NULL;
}

/* ---- the main thread's side ---- */

/* WatchdogSec in microseconds, by sd_watchdog_enabled's rules ($WATCHDOG_USEC, and $WATCHDOG_PID
 * naming this process when set); 0: no watchdog. */
static int64_t watchdog_interval_us(void) {
    uint64_t usec = 0;
#ifdef PGCLD_HAVE_LIBSYSTEMD
    int rc = sd_watchdog_enabled(0, &usec);
    if (rc < 0) pgcl_log_warn("systemd: $WATCHDOG_USEC or $WATCHDOG_PID unreadable (%s): no watchdog", strerror(-rc));
    if (rc <= 0) usec = 0;
#endif
    return usec > INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t)usec;
}

pgcld_notifier *pgcld_notifier_start(pgcld_server *srv) {
    const char *socket_path = getenv("NOTIFY_SOCKET");
    if (!socket_path || !*socket_path) return NULL; /* not under a service manager: nothing changes */
#ifndef PGCLD_HAVE_LIBSYSTEMD
    pgcl_log_warn("systemd: $NOTIFY_SOCKET is set, but this pgcld was built without libsystemd (meson option "
                  "systemd; Debian's libsystemd-dev): it sends no READY=1, so a Type=notify unit fails to start. "
                  "Rebuild with libsystemd, or use Type=exec");
    return NULL;
#endif
    pgcld_notifier *n = calloc(1, sizeof *n);
    if (!n) {
        pgcl_log_error("systemd: out of memory: no notifications");
        return NULL;
    }
    n->srv = srv;
    n->watchdog_us = watchdog_interval_us();
    pthread_mutex_init(&n->lock, NULL);
    pgcl_cond_init_monotonic(&n->wake);
    if (pthread_create(&n->thread, NULL, notifier_main, n) != 0) {
        pgcl_log_error("systemd: cannot start the notifier thread: no notifications");
        pthread_mutex_destroy(&n->lock);
        pthread_cond_destroy(&n->wake);
        free(n);
        return NULL;
    }
    if (n->watchdog_us)
        pgcl_log_info("systemd: notifying %s; WATCHDOG=1 every %.1f s while the audit writer has owed progress for "
                      "less than %.1f s",
                      socket_path, (double)n->watchdog_us / 2e6, (double)n->watchdog_us / 2e6);
    else
        pgcl_log_info("systemd: notifying %s; no watchdog", socket_path);
    return n;
}

void pgcld_notifier_started(pgcld_notifier *n) {
    if (!n) return;
    bool models, audit, draining;
    bool ready = pgcld_server_readiness(n->srv, &models, &audit, &draining);
    status_text s;
    compose_status(n, true, false, &s);
    pthread_mutex_lock(&n->lock);
    n->started = true;
    send_first_ready_locked(n, ready, &s);
    if (!n->ready_sent) {
        pgcl_log_info("systemd: READY=1 waits until /readyz would answer 200 (%s)", s.text);
        send_with_status_locked(n, "", &s);
    }
    pthread_mutex_unlock(&n->lock);
}

void pgcld_notifier_reloading(pgcld_notifier *n) {
    if (!n) return;
    pthread_mutex_lock(&n->lock);
    if (n->ready_sent && !n->stopping) {
        /* MONOTONIC_USEC: systemd >= 253 (Type=notify-reload) matches the reload it asked for by it */
        char fields[96];
        snprintf(fields, sizeof fields, "RELOADING=1\nMONOTONIC_USEC=%" PRId64, pgcl_monotonic_us());
        status_text s = {.text = "reloading"};
        send_with_status_locked(n, fields, &s);
        n->reloading = true;
    }
    pthread_mutex_unlock(&n->lock);
}

void pgcld_notifier_reloaded(pgcld_notifier *n) {
    if (!n) return;
    status_text s;
    compose_status(n, true, false, &s);
    pthread_mutex_lock(&n->lock);
    if (n->reloading) {
        n->reloading = false;
        send_with_status_locked(n, "READY=1", &s);
    }
    pthread_mutex_unlock(&n->lock);
}

void pgcld_notifier_stopping(pgcld_notifier *n) {
    if (!n) return;
    status_text s;
    compose_status(n, true, true, &s);
    pthread_mutex_lock(&n->lock);
    n->stopping = true;
    n->reloading = false;
    send_with_status_locked(n, "STOPPING=1", &s);
    pthread_mutex_unlock(&n->lock);
}

void pgcld_notifier_stop(pgcld_notifier *n) {
    if (!n) return;
    pthread_mutex_lock(&n->lock);
    n->closing = true;
    pthread_cond_signal(&n->wake);
    pthread_mutex_unlock(&n->lock);
    pthread_join(n->thread, NULL);
    pthread_mutex_destroy(&n->lock);
    pthread_cond_destroy(&n->wake);
    free(n);
}
