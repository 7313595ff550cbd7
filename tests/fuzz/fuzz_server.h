/* The whole pgcld HTTP server in the fuzzing process, as `pgcld serve --auth off` would run it
 * (libmicrohttpd, routes, the CPU backend, the batcher, the audit log in a temporary SQLite file,
 * the tiny test models), but without a listening socket: each input is handed to libmicrohttpd as
 * one connection of a socket pair with MHD_add_connection(). */
#ifndef PGCLD_FUZZ_SERVER_H
#define PGCLD_FUZZ_SERVER_H

#include <stddef.h>
#include <stdint.h>

/* Starts the server once (aborts on failure); the temporary directory is removed at exit. */
void fuzz_server_start(void);

/* Sends the bytes as one client connection, closes the sending side, and reads whatever the server
 * answers until it closes the connection. Aborts when no answer ends within the time limit (a
 * hang). Returns the number of bytes received. */
size_t fuzz_server_exchange(const uint8_t *data, size_t size);

#endif
