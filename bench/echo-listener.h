/* SPDX-License-Identifier: MIT */
/*
 * The listening side both baseline echo servers share: a TCP listener on
 * ADDR:PORT and the "listening on ADDR:PORT" line echo-bench.sh waits for.
 * Errors go to stderr prefixed with the server's name.
 */
#ifndef ECHO_LISTENER_H
#define ECHO_LISTENER_H

/* A listening socket of type SOCK_STREAM | sock_flags; *bound gets the
   port it took (port 0: one the kernel picks).  -1 on failure. */
int echo_listen(const char *prog, const char *addr, unsigned port, int sock_flags,
		unsigned *bound);

/* Call last, once nothing else can fail: whoever waits on the line takes it
   as a server ready to serve, and one that does not come as a failure. */
int echo_announce(const char *prog, const char *addr, unsigned port);

#endif
