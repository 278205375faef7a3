/* SPDX-License-Identifier: MIT */
/*
 * echo-bench: a load generator for TCP echo servers.
 *
 * Opens N connections to the server, then keeps exactly one message of
 * --size bytes in flight on each: send it, read until all of it came back,
 * send the next.  One thread, level-triggered epoll, non-blocking sockets.
 * After --warmup seconds it counts round trips for --duration seconds and
 * reads the server's CPU time (user + system, all its threads) from
 * /proc/PID/stat before and after.
 *
 * With --churn every message goes over a new connection instead (connect,
 * send, receive the echo, close, connect again): requests/s is then
 * connections/s, and the server's accept and close paths are measured.
 *
 * It prints one line of key=value pairs:
 *   conns size seconds requests req_s server_cpu_s server_cpu_pct
 *   cpu_us_per_req client_cpu_pct others_cpu_pct steal_pct connect_s
 * client_cpu_pct near 100 means the client, not the server, set the pace.
 * others_cpu_pct is the CPU time every other process on the machine took
 * meanwhile (from /proc/stat, less the server's and ours; softirq work is
 * charged to whichever task it interrupted), and steal_pct the time the
 * hypervisor ran something else: when either is large, the run was
 * disturbed.
 * Exit status: 0, 1 when the server misbehaved (closed a connection, sent
 * back more than was sent), 2 for a bad argument.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_EVENTS	1024
#define MAX_CONNECTING	256	/* handshakes in progress at once */
#define MAX_SIZE	16384	/* a send this size always fits an empty socket buffer */
#define CONNECT_GUARD_S	60.0	/* give up connecting after this long */
#define CONNS_PER_SOURCE 4096	/* the kernel finds a free port slowly when most are taken */
#define SPARE_FDS	16

enum state { C_IDLE, C_CONNECTING, C_RUNNING };

struct bconn {
	int fd;
	uint32_t got;		/* bytes of the current echo received */
	uint8_t state;
};

struct opts {
	struct sockaddr_in server;
	unsigned conns;
	unsigned size;
	double warmup;
	double duration;
	long server_pid;	/* 0: no server CPU figures */
	bool churn;		/* a new connection for every message */
};

struct sample {
	double t;		/* CLOCK_MONOTONIC, s */
	uint64_t requests;
	double server_cpu;	/* s, or -1 */
	double client_cpu;	/* s */
	double busy;		/* every CPU's non-idle time, s, or -1 */
	double steal;		/* s */
};

static struct bconn *conns;
static char *msg, *rbuf;
static int epfd;
static uint64_t requests;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static __attribute__((noreturn, format(printf, 1, 2))) void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("echo-bench: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/* ---- CPU time ---- */

/* utime + stime of every thread of pid, in seconds; -1 when unreadable. */
static double proc_cpu(long pid)
{
	char path[64], buf[1024], *p;
	unsigned long long utime, stime;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* The command name may hold spaces and parentheses: skip to the last ')'. */
	p = strrchr(buf, ')');
	/* After it: state (3) ... utime (14), stime (15). */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			 &utime, &stime) != 2)
		return -1;
	return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

static double self_cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* The machine's busy and stolen time from the first line of /proc/stat. */
static void machine_cpu(double *busy, double *steal)
{
	unsigned long long user, nice, sys, idle, iowait, irq, softirq, st;
	char buf[512];
	ssize_t n;
	int fd;

	*busy = -1;
	*steal = 0;
	fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	if (sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &sys,
		   &idle, &iowait, &irq, &softirq, &st) != 8)
		return;
	*busy = (double)(user + nice + sys + irq + softirq) / (double)sysconf(_SC_CLK_TCK);
	*steal = (double)st / (double)sysconf(_SC_CLK_TCK);
}

static void take_sample(const struct opts *o, struct sample *s)
{
	s->t = now();
	s->requests = requests;
	s->server_cpu = o->server_pid ? proc_cpu(o->server_pid) : -1;
	s->client_cpu = self_cpu();
	machine_cpu(&s->busy, &s->steal);
}

/* ---- connecting ---- */

static void set_events(struct bconn *c, unsigned i, unsigned events, int op)
{
	struct epoll_event ev = { .events = events, .data.u32 = i };

	if (epoll_ctl(epfd, op, c->fd, &ev))
		die("epoll_ctl: %s", strerror(errno));
}

/* Past CONNS_PER_SOURCE connections, from 127.0.0.2, .3, ... as well:
   one source address has only so many ephemeral ports towards one server,
   and connect() searches longer for a free one the more are taken (20,000
   connections from one address took 11 s here, against 0.6 s for 10,000). */
static void bind_source(int fd, const struct opts *o, unsigned i)
{
	unsigned sources = (o->conns + CONNS_PER_SOURCE - 1) / CONNS_PER_SOURCE;
	struct sockaddr_in src = { .sin_family = AF_INET };
	int one = 1;

	if (sources < 2 || (ntohl(o->server.sin_addr.s_addr) >> 24) != 127)
		return;
	src.sin_addr.s_addr = htonl(0x7f000001u + i % sources);
	/* The port is picked at connect(), for the whole address pair. */
	setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&src, sizeof(src)))
		die("bind to 127.0.0.%u: %s", 1 + i % sources, strerror(errno));
}

static void start_connect(const struct opts *o, unsigned i)
{
	struct bconn *c = &conns[i];

	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		die("socket: %s", strerror(errno));
	bind_source(c->fd, o, i);
	if (connect(c->fd, (const struct sockaddr *)&o->server, sizeof(o->server)) &&
	    errno != EINPROGRESS)
		die("connect: %s", strerror(errno));
	c->state = C_CONNECTING;
	set_events(c, i, EPOLLOUT, EPOLL_CTL_ADD);
}

static void send_message(struct bconn *c, unsigned size);

static void connected(struct bconn *c, unsigned i)
{
	socklen_t len = sizeof(int);
	int err = 0;

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err)
		die("connect: %s", strerror(err ? err : errno));
	c->state = C_RUNNING;
	set_events(c, i, EPOLLIN, EPOLL_CTL_MOD);
}

/* All N connections, at most MAX_CONNECTING handshakes at a time (the
   server's listen backlog is finite). */
static void connect_all(const struct opts *o)
{
	struct epoll_event ev[MAX_EVENTS];
	unsigned started = 0, done = 0;
	double deadline = now() + CONNECT_GUARD_S;
	int n;

	while (done < o->conns) {
		while (started < o->conns && started - done < MAX_CONNECTING)
			start_connect(o, started++);
		if (now() > deadline)
			die("connected only %u of %u in %.0f s", done, o->conns, CONNECT_GUARD_S);
		n = epoll_wait(epfd, ev, MAX_EVENTS, 100);
		for (int i = 0; i < n; i++) {
			struct bconn *c = &conns[ev[i].data.u32];

			if (c->state == C_CONNECTING) {
				connected(c, ev[i].data.u32);
				done++;
			}
		}
	}
}

/* ---- the echo loop ---- */

static void send_message(struct bconn *c, unsigned size)
{
	ssize_t n;

	do
		n = send(c->fd, msg, size, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)size)
		die("send: %s", n < 0 ? strerror(errno) : "short send into an empty buffer");
}

/* A whole echo came back on connection i: the next message, on this
   connection or (--churn) on a new one in its place. */
static void echoed(const struct opts *o, struct bconn *c, unsigned i)
{
	c->got = 0;
	requests++;
	if (!o->churn) {
		send_message(c, o->size);
		return;
	}
	close(c->fd);
	start_connect(o, i);
}

static void on_readable(const struct opts *o, struct bconn *c, unsigned i)
{
	ssize_t n = recv(c->fd, rbuf, o->size - c->got, 0);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0)
		die("the server %s a connection", n ? "reset" : "closed");
	c->got += (uint32_t)n;
	if (c->got == o->size)
		echoed(o, c, i);
}

/* Runs the echo loop until the clock passes `until`. */
static void run_until(const struct opts *o, double until)
{
	struct epoll_event ev[MAX_EVENTS];
	int n;

	while (now() < until) {
		n = epoll_wait(epfd, ev, MAX_EVENTS, 50);
		if (n < 0 && errno != EINTR)
			die("epoll_wait: %s", strerror(errno));
		for (int i = 0; i < n; i++) {
			unsigned k = ev[i].data.u32;

			if (conns[k].state == C_RUNNING) {
				on_readable(o, &conns[k], k);
			} else {
				connected(&conns[k], k);
				send_message(&conns[k], o->size);
			}
		}
	}
}

/* ---- options ---- */

static double parse_seconds(const char *name, const char *arg)
{
	char *end;
	double v = strtod(arg, &end);

	if (end == arg || *end || v <= 0 || v > 3600) {
		fprintf(stderr, "echo-bench: --%s: expected seconds, got \"%s\"\n", name, arg);
		exit(2);
	}
	return v;
}

static unsigned long parse_num(const char *name, const char *arg, unsigned long min,
			       unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || v < min || v > max) {
		fprintf(stderr, "echo-bench: --%s: expected %lu to %lu, got \"%s\"\n",
			name, min, max, arg);
		exit(2);
	}
	return v;
}

static void usage(FILE *f)
{
	fputs("usage: echo-bench --port N [--addr A] [--conns N] [--size BYTES]\n"
	      "                  [--warmup S] [--duration S] [--server-pid PID] [--churn]\n"
	      "defaults: 127.0.0.1, 100 connections, 1024 bytes, 1 s warm-up, 3 s\n", f);
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "addr", required_argument, NULL, 'a' },
		{ "port", required_argument, NULL, 'p' },
		{ "conns", required_argument, NULL, 'c' },
		{ "size", required_argument, NULL, 's' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "duration", required_argument, NULL, 'd' },
		{ "server-pid", required_argument, NULL, 'P' },
		{ "churn", no_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *addr = "127.0.0.1";
	long port = -1;
	int opt;

	*o = (struct opts){ .conns = 100, .size = 1024, .warmup = 1, .duration = 3 };
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'a': addr = optarg; break;
		case 'p': port = (long)parse_num("port", optarg, 1, 65535); break;
		case 'c': o->conns = (unsigned)parse_num("conns", optarg, 1, 1000000); break;
		case 's': o->size = (unsigned)parse_num("size", optarg, 1, MAX_SIZE); break;
		case 'w': o->warmup = parse_seconds("warmup", optarg); break;
		case 'd': o->duration = parse_seconds("duration", optarg); break;
		case 'P': o->server_pid = (long)parse_num("server-pid", optarg, 1, 1u << 30); break;
		case 'C': o->churn = true; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	o->server.sin_family = AF_INET;
	o->server.sin_port = htons((uint16_t)port);
	if (port < 0 || optind != argc || inet_pton(AF_INET, addr, &o->server.sin_addr) != 1) {
		usage(stderr);
		exit(2);
	}
}

/* One descriptor per connection, and a few of our own. */
static void check_nofile(unsigned conns)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < (rlim_t)conns + SPARE_FDS)
		die("%u connections need %u descriptors, RLIMIT_NOFILE allows %llu "
		    "(raise it with prlimit --nofile)", conns, conns + SPARE_FDS,
		    (unsigned long long)rl.rlim_cur);
}

static void report(const struct opts *o, const struct sample *a, const struct sample *b,
		   double connect_s)
{
	double secs = b->t - a->t, reqs = (double)(b->requests - a->requests);
	double scpu = a->server_cpu >= 0 && b->server_cpu >= 0 ? b->server_cpu - a->server_cpu : -1;
	double ccpu = b->client_cpu - a->client_cpu;

	printf("conns=%u size=%u seconds=%.3f requests=%.0f req_s=%.0f", o->conns, o->size,
	       secs, reqs, reqs / secs);
	if (scpu >= 0)
		printf(" server_cpu_s=%.2f server_cpu_pct=%.1f cpu_us_per_req=%.3f", scpu,
		       100 * scpu / secs, reqs ? 1e6 * scpu / reqs : 0);
	printf(" client_cpu_pct=%.1f", 100 * ccpu / secs);
	if (scpu >= 0 && a->busy >= 0 && b->busy >= 0)
		printf(" others_cpu_pct=%.1f steal_pct=%.1f",
		       100 * (b->busy - a->busy - scpu - ccpu) / secs,
		       100 * (b->steal - a->steal) / secs);
	printf(" connect_s=%.2f%s\n", connect_s, o->churn ? " churn=1" : "");
}

int main(int argc, char **argv)
{
	struct sample start, end;
	struct opts o;
	double t0, connect_s;

	parse_args(argc, argv, &o);
	check_nofile(o.conns);
	conns = calloc(o.conns, sizeof(*conns));
	msg = malloc(o.size);
	rbuf = malloc(o.size);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (!conns || !msg || !rbuf || epfd < 0)
		die("out of memory or descriptors");
	for (unsigned i = 0; i < o.size; i++)
		msg[i] = (char)('a' + i % 26);

	t0 = now();
	connect_all(&o);
	connect_s = now() - t0;
	for (unsigned i = 0; i < o.conns; i++)
		send_message(&conns[i], o.size);
	run_until(&o, now() + o.warmup);
	take_sample(&o, &start);
	run_until(&o, start.t + o.duration);
	take_sample(&o, &end);
	report(&o, &start, &end, connect_s);

	for (unsigned i = 0; i < o.conns; i++)
		close(conns[i].fd);
	free(conns);
	free(msg);
	free(rbuf);
	close(epfd);
	return 0;
}
