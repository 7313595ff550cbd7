/* systemd's readiness protocol (sd_notify(3)) for a `Type=notify` unit with `WatchdogSec=`
 * (deploy/systemd/pgcld.service; docs/operations.md, "systemd").
 *
 * Under systemd ($NOTIFY_SOCKET set) a notifier thread tells the service manager:
 *   READY=1      the first time /readyz would answer 200 (pgcld_server_readiness), once start-up is
 *                done (pgcld_notifier_started), and again after each reload;
 *   RELOADING=1  with MONOTONIC_USEC=, when SIGHUP's reload begins (pgcld_notifier_reloading);
 *   STOPPING=1   when the drain begins (pgcld_notifier_stopping);
 *   WATCHDOG=1   every half WatchdogSec ($WATCHDOG_USEC, sd_watchdog_enabled's rules), but only
 *                while the audit writer is alive: it has owed progress
 *                (pgcl_audit_writer_stall_us) for less than half WatchdogSec;
 *   STATUS=      the models served and the audit queue ("serving toxicity/1; audit queue 0 rows"),
 *                whenever that text changes.
 * Without $NOTIFY_SOCKET nothing starts and every call is a no-op; a build without libsystemd
 * (meson option systemd=disabled, or libsystemd-dev absent) says so at start when $NOTIFY_SOCKET
 * is set, and sends nothing. */
#ifndef PGCLD_SYSTEMD_NOTIFY_H
#define PGCLD_SYSTEMD_NOTIFY_H

#include "server.h"

typedef struct pgcld_notifier pgcld_notifier;

/* Starts the notifier thread for srv, whose registry and audit store must outlive it (stop it
 * before closing them). Call it before the models load, so the watchdog is fed during a long
 * load. NULL when there is nothing to notify (no $NOTIFY_SOCKET, a build without libsystemd, no
 * memory: each logged); every other call accepts NULL. */
pgcld_notifier *pgcld_notifier_start(pgcld_server *srv);

/* Start-up is done (the port file is written): READY=1 now if /readyz would answer 200, else as
 * soon as it would. Main thread. */
void pgcld_notifier_started(pgcld_notifier *n);

/* SIGHUP's reload begins (RELOADING=1) and ends (READY=1). A reload before the first READY=1
 * sends neither. Main thread. */
void pgcld_notifier_reloading(pgcld_notifier *n);
void pgcld_notifier_reloaded(pgcld_notifier *n);

/* The drain has begun: STOPPING=1; no READY=1 follows. The watchdog goes on until
 * pgcld_notifier_stop. Main thread. */
void pgcld_notifier_stopping(pgcld_notifier *n);

/* Stops and joins the thread and frees n. Accepts NULL. */
void pgcld_notifier_stop(pgcld_notifier *n);

#endif
