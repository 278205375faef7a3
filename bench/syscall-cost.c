/* SPDX-License-Identifier: MIT */
/*
 * What one system call costs on this machine, next to the calls a cached
 * 4 KiB response is made of: a ratio of two servers that differ by one
 * call per request is read against these (bench/README.md, "nginx").
 *
 *   syscall-cost FILE [CALLS]      (FILE: read from the page cache)
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct { uint64_t off, len; } range = { 0, 4096 };
	uint64_t stat[5];
	char buf[4096];
	struct iovec iov = { buf, sizeof(buf) };
	long calls = argc > 2 ? atol(argv[2]) : 500000;
	double t;
	int fd;

	if (argc < 2 || (fd = open(argv[1], O_RDONLY)) < 0 || calls <= 0) {
		fprintf(stderr, "usage: syscall-cost FILE [CALLS]\n");
		return 2;
	}
	(void)!pread(fd, buf, sizeof(buf), 0);
#define TIME(name, call) do {						\
		t = now_s();						\
		for (long i = 0; i < calls; i++)			\
			(void)(call);					\
		printf("%-24s %6.0f ns\n", name, (now_s() - t) / calls * 1e9); \
	} while (0)
	TIME("getppid", syscall(SYS_getppid));
	TIME("fcntl F_GETFL", fcntl(fd, F_GETFL));
	TIME("cachestat 4 KiB", syscall(SYS_cachestat, fd, &range, stat, 0));
	TIME("pread 4 KiB", pread(fd, buf, sizeof(buf), 0));
	TIME("preadv2 RWF_NOWAIT 4 KiB", preadv2(fd, &iov, 1, 0, RWF_NOWAIT));
	return 0;
}
