/* SPDX-License-Identifier: MIT */
/*
 * Running an example server under test: started with --port 0 and the
 * backend and mode of a target, its port read from the first line of its
 * stdout, stopped with SIGTERM.  Shared by the examples and httpd suites.
 */
#ifndef AFIO_TESTS_SERVERUTIL_H
#define AFIO_TESTS_SERVERUTIL_H

#include <stdnoreturn.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "asyncfio.h"

/* How long any one wait may last before a test calls the server hung.
   A guard against hanging forever, not a measure of speed. */
#define HANG_GUARD_MS	60000

struct target {
	enum afio_backend backend;
	enum afio_mode mode;
	char name[32];
};

/* Every backend and mode, of each backend that probes as available. */
#define MAX_TARGETS	9

/* Fills out[MAX_TARGETS] and returns how many; only: "backend/mode" to
   keep that one alone, or NULL. */
int find_targets(struct target *out, const char *only);

/* How to run a server besides its backend and mode. */
struct launch {
	const char *path;
	const char *const *args;	/* more options, NULL-terminated; may be NULL */
	int err_fd;			/* its stderr, or -1 for ours */
	rlim_t nofile;			/* RLIMIT_NOFILE, soft and hard; 0: ours */
};

struct server {
	pid_t pid;
	int pidfd;
	int out_fd;		/* its stdout */
	int err_fd;		/* what launch gave it, kept for the caller */
	unsigned port;
	const struct target *target;
};

/* In a child: becomes the server, its stdout on out_fd. */
noreturn void server_exec(const struct target *t, const struct launch *how, int out_fd);

/* Starts it and reads the port it announces. */
void server_start(struct server *s, const struct target *t, const struct launch *how);

/* SIGTERM (SIGKILL past the guard), then reaped; returns its wait status. */
int server_stop(struct server *s);

/* ---- the client's side ---- */

/* A TCP connection to 127.0.0.1:port; rcvbuf: SO_RCVBUF, set before the
   window is agreed on, 0 for the default. */
int connect_with(unsigned port, int rcvbuf);
int connect_to(unsigned port);

/* Until fd has one of events, within the guard. */
void wait_for(int fd, short events);

void send_all(int fd, const void *buf, size_t len);

/* Bytes that differ from one size to the next, so a mix-up shows; the
   caller frees them. */
char *pattern(size_t len, unsigned seed);

#endif
