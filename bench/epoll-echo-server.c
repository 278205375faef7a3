/* SPDX-License-Identifier: MIT */
/*
 * epoll-echo-server: the baseline afio-echo is measured against, a TCP
 * echo server written the usual way.  One thread, level-triggered epoll,
 * non-blocking sockets; read what is there, write it straight back, and
 * only when a write is short keep the rest and wait for EPOLLOUT (not
 * reading meanwhile, so a client that does not read is not buffered
 * without end).
 *
 * usage: epoll-echo-server [--addr A] [--port N]
 * The first line of stdout is "listening on ADDR:PORT"; SIGINT or SIGTERM
 * ends it with status 0.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "echo-listener.h"

#define MAX_EVENTS	256
#define BUF_SIZE	4096	/* as afio-echo's default */
#define KEY_LISTENER	((void *)1)
#define KEY_SIGNAL	((void *)2)

struct conn {
	int fd;
	size_t len;		/* bytes waiting to go back */
	size_t sent;
	char buf[BUF_SIZE];
};

static int epfd;
/* By fd, so that an exit can free what is still open. */
static struct conn **conns;
static size_t nconns;

static void raise_nofile(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void conn_close(struct conn *c)
{
	conns[c->fd] = NULL;
	close(c->fd);
	free(c);
}

static bool remember(struct conn *c)
{
	size_t n = nconns;
	struct conn **bigger;

	if ((size_t)c->fd >= n) {
		while ((size_t)c->fd >= n)
			n = n ? 2 * n : 1024;
		bigger = realloc(conns, n * sizeof(*conns));
		if (!bigger)
			return false;
		memset(bigger + nconns, 0, (n - nconns) * sizeof(*conns));
		conns = bigger;
		nconns = n;
	}
	conns[c->fd] = c;
	return true;
}

static void close_all(void)
{
	for (size_t i = 0; i < nconns; i++)
		if (conns[i])
			conn_close(conns[i]);
	free(conns);
}

static int set_events(struct conn *c, unsigned events)
{
	struct epoll_event ev = { .events = events, .data.ptr = c };

	return epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Writes what is left; false when the connection is to be closed. */
static bool flush_out(struct conn *c)
{
	ssize_t n;

	while (c->sent < c->len) {
		n = send(c->fd, c->buf + c->sent, c->len - c->sent, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return !set_events(c, EPOLLOUT);
		if (n <= 0)
			return false;
		c->sent += (size_t)n;
	}
	c->len = c->sent = 0;
	return true;
}

static void on_conn(struct conn *c, unsigned events)
{
	bool was_waiting = c->len > 0;
	ssize_t n;

	if (was_waiting) {
		if (!flush_out(c))
			conn_close(c);
		else if (!c->len && set_events(c, EPOLLIN))
			conn_close(c);
		return;
	}
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return;
	n = recv(c->fd, c->buf, sizeof(c->buf), 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_close(c);
		return;
	}
	c->len = (size_t)n;
	c->sent = 0;
	if (!flush_out(c))
		conn_close(c);
}

static void accept_all(int lfd)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct conn *c;
	int fd;

	for (;;) {
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN)
				perror("accept4");
			return;
		}
		c = malloc(sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->len = c->sent = 0;
		ev.data.ptr = c;
		if (!remember(c)) {
			close(fd);
			free(c);
		} else if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)) {
			conn_close(c);
		}
	}
}

static int open_signalfd(void)
{
	sigset_t mask;
	int fd;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		perror("epoll-echo-server: signalfd");
	return fd;
}

static int watch(int fd, void *key)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = key };

	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)) {
		perror("epoll-echo-server: epoll_ctl");
		return -1;
	}
	return 0;
}

static void parse_args(int argc, char **argv, const char **addr, unsigned *port)
{
	static const struct option longopts[] = {
		{ "addr", required_argument, NULL, 'a' },
		{ "port", required_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (opt == 'a') {
			*addr = optarg;
		} else if (opt == 'p') {
			*port = (unsigned)strtoul(optarg, NULL, 10);
		} else {
			fprintf(stderr, "usage: epoll-echo-server [--addr A] [--port N]\n");
			exit(2);
		}
	}
}

int main(int argc, char **argv)
{
	struct epoll_event ev[MAX_EVENTS];
	const char *addr = "127.0.0.1";
	unsigned port = 8007;
	int lfd, sfd, n;

	parse_args(argc, argv, &addr, &port);
	raise_nofile();
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0) {
		perror("epoll-echo-server: epoll_create1");
		return 1;
	}
	sfd = open_signalfd();
	lfd = echo_listen("epoll-echo-server", addr, port, SOCK_NONBLOCK | SOCK_CLOEXEC, &port);
	if (sfd < 0 || lfd < 0 || watch(lfd, KEY_LISTENER) || watch(sfd, KEY_SIGNAL) ||
	    echo_announce("epoll-echo-server", addr, port))
		return 1;
	for (;;) {
		n = epoll_wait(epfd, ev, MAX_EVENTS, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			perror("epoll_wait");
			return 1;
		}
		for (int i = 0; i < n; i++) {
			if (ev[i].data.ptr == KEY_SIGNAL) {
				close_all();
				return 0;
			}
			if (ev[i].data.ptr == KEY_LISTENER)
				accept_all(lfd);
			else
				on_conn(ev[i].data.ptr, ev[i].events);
		}
	}
}
