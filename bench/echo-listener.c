/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "echo-listener.h"

int echo_listen(const char *prog, const char *addr, unsigned port, int sock_flags,
		unsigned *bound)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	socklen_t len = sizeof(sin);
	int one = 1, fd;

	if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1) {
		fprintf(stderr, "%s: bad address %s\n", prog, addr);
		return -1;
	}
	fd = socket(AF_INET, SOCK_STREAM | sock_flags, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) || listen(fd, SOMAXCONN) ||
	    getsockname(fd, (struct sockaddr *)&sin, &len)) {
		fprintf(stderr, "%s: listen: %s\n", prog, strerror(errno));
		return -1;
	}
	*bound = ntohs(sin.sin_port);
	return fd;
}

int echo_announce(const char *prog, const char *addr, unsigned port)
{
	if (printf("listening on %s:%u\n", addr, port) < 0 || fflush(stdout)) {
		fprintf(stderr, "%s: stdout: %s\n", prog, strerror(errno));
		return -1;
	}
	return 0;
}
