/*
 * fio-asyncfio: an external fio ioengine on libasyncfio.
 *
 *   fio --ioengine=external:/path/fio-asyncfio.so --afio_backend=libaio ...
 *
 * queue  -> afio_read/afio_write/afio_fsync/afio_sync_range/afio_fallocate
 * commit -> afio_submit, or nothing when the request is fio's only one
 *           and its queue is full (depth 1): fio then waits for it, and
 *           afio_poll() submits and waits in one call (the pool then runs
 *           it in fio's thread, where a hand-off to a worker and back
 *           would cost two wake-ups)
 * getevents -> afio_poll, whose callbacks put finished io_us on a list
 * event  -> the io_u at that place of the list
 *
 * fio's engine ABI is the layout of its structures, which depends on the
 * exact fio version and its configure result (config-host.h) and is not
 * checked by fio beyond FIO_IOOPS_VERSION.  build.sh builds this file
 * against the source and configuration of the fio it is meant for and
 * passes that fio's version string in AFIO_FIO_VERSION.  At load, before
 * fio parses our options or we read any of its structures, the engine
 * refuses any other fio, and a fio whose own option table puts a few
 * thread_options fields elsewhere than we were compiled for.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>

#include "fio.h"
#include "optgroup.h"

#include <asyncfio.h>

#ifndef AFIO_FIO_VERSION
#error "AFIO_FIO_VERSION: the version string of the fio this is built against (build.sh sets it)"
#endif

/* afio_mode left unset: the library's default, which AFIO_MODE may change;
   a mode given in the job is the job's (AFIO_MODE_FIXED). */
#define AFIO_FIO_MODE_DEFAULT	0xffu

struct afio_fio_options {
	void *pad;		/* fio takes an off1 of 0 for "no offset" */
	unsigned int backend;
	unsigned int mode;
	unsigned int threads;
	unsigned int submit_each;
	unsigned int no_fallback;
	unsigned int caller_writes;
};

struct afio_fio_data {
	afio_ctx *ctx;
	/* queued but not yet handed to afio_submit(): their issue time is set there */
	struct io_u **pending;
	unsigned int nr_pending;
	/* finished: [0, nr_returned) were handed to fio by the last getevents */
	struct io_u **done;
	unsigned int nr_done;
	unsigned int nr_returned;
	unsigned int depth;
};

static struct fio_option options[] = {
	{
		.name	= "afio_backend",
		.lname	= "libasyncfio backend",
		.type	= FIO_OPT_STR,
		.off1	= offsetof(struct afio_fio_options, backend),
		.help	= "libasyncfio backend to run on",
		.def	= "auto",
		.posval	= {
			  { .ival = "auto", .oval = AFIO_BACKEND_AUTO,
			    .help = "io_uring, else libaio, else threads (first that probes)" },
			  { .ival = "io_uring", .oval = AFIO_BACKEND_IO_URING,
			    .help = "io_uring (liburing)" },
			  { .ival = "libaio", .oval = AFIO_BACKEND_LIBAIO,
			    .help = "Linux AIO; buffered or misaligned I/O goes to the pool" },
			  { .ival = "threads", .oval = AFIO_BACKEND_THREADS,
			    .help = "thread pool" },
		},
		.category = FIO_OPT_C_ENGINE,
		.group	= FIO_OPT_G_INVALID,
	},
	{
		.name	= "afio_mode",
		.lname	= "libasyncfio mode",
		.type	= FIO_OPT_STR,
		.off1	= offsetof(struct afio_fio_options, mode),
		.help	= "where a request that cannot finish at once is worked on",
		.def	= "default",
		.posval	= {
			  { .ival = "default", .oval = AFIO_FIO_MODE_DEFAULT,
			    .help = "inline, or AFIO_MODE from the environment" },
			  { .ival = "inline", .oval = AFIO_MODE_INLINE,
			    .help = "try without blocking in the submitter, then hand on" },
			  { .ival = "async", .oval = AFIO_MODE_ASYNC,
			    .help = "a worker does every request" },
			  { .ival = "hybrid", .oval = AFIO_MODE_HYBRID,
			    .help = "a worker tries without blocking, then waits by readiness" },
		},
		.category = FIO_OPT_C_ENGINE,
		.group	= FIO_OPT_G_INVALID,
	},
	{
		.name	= "afio_threads",
		.lname	= "libasyncfio pool threads",
		.type	= FIO_OPT_INT,
		.off1	= offsetof(struct afio_fio_options, threads),
		.help	= "thread pool workers (unset: the library's default)",
		.minval	= 1,
		.maxval	= 1024,
		.category = FIO_OPT_C_ENGINE,
		.group	= FIO_OPT_G_INVALID,
	},
	{
		.name	= "afio_submit_each",
		.lname	= "libasyncfio submit each",
		.type	= FIO_OPT_STR_SET,
		.off1	= offsetof(struct afio_fio_options, submit_each),
		.help	= "hand every request to afio_submit() as it is queued",
		.category = FIO_OPT_C_ENGINE,
		.group	= FIO_OPT_G_INVALID,
	},
	{
		.name	= "afio_no_fallback",
		.lname	= "libasyncfio no fallback",
		.type	= FIO_OPT_STR_SET,
		.off1	= offsetof(struct afio_fio_options, no_fallback),
		.help	= "fail when the asked backend cannot run here, never take another",
		.category = FIO_OPT_C_ENGINE,
		.group	= FIO_OPT_G_INVALID,
	},
	{
		.name	= "afio_caller_writes",
		.lname	= "libasyncfio caller writes",
		.type	= FIO_OPT_STR_SET,
		.off1	= offsetof(struct afio_fio_options, caller_writes),
		.help	= "inline: buffered writes in fio's thread, which may wait in them "
			  "as psync does (AFIO_CALLER_WRITES)",
		.category = FIO_OPT_C_ENGINE,
		.group	= FIO_OPT_G_INVALID,
	},
	{
		.name	= NULL,
	},
};

/*
 * A layout check from the running fio itself: its option table records
 * where each option lives in struct thread_options.  A fio configured
 * differently from the one we were built against moves some of them.
 */
static int afio_fio_check_layout(void)
{
	static const struct {
		const char *name;
		size_t off;
	} fields[] = {
		{ "iodepth", offsetof(struct thread_options, iodepth) },
		{ "direct", offsetof(struct thread_options, odirect) },
		{ "verify", offsetof(struct thread_options, verify) },
		{ "sync_file_range", offsetof(struct thread_options, sync_file_range) },
		{ "disable_slat", offsetof(struct thread_options, disable_slat) },
		{ "stats", offsetof(struct thread_options, stats) },
	};
	const struct fio_option *table = dlsym(RTLD_DEFAULT, "fio_options");
	unsigned int i, found = 0;

	if (!table) {
		fprintf(stderr, "fio-asyncfio: this program exports no fio_options table; "
			"not the fio this engine was built for (%s)\n", AFIO_FIO_VERSION);
		return -1;
	}
	for (const struct fio_option *o = table; o->name; o++) {
		for (i = 0; i < FIO_ARRAY_SIZE(fields); i++) {
			if (strcmp(o->name, fields[i].name))
				continue;
			if (o->off1 != fields[i].off) {
				fprintf(stderr, "fio-asyncfio: option %s is at offset %u in this fio, "
					"%zu in the one this engine was built for (%s): "
					"configured differently, rebuild the engine against it\n",
					o->name, o->off1, fields[i].off, AFIO_FIO_VERSION);
				return -1;
			}
			found++;
		}
	}
	if (found != FIO_ARRAY_SIZE(fields)) {
		fprintf(stderr, "fio-asyncfio: %u of %zu known options found in this fio's table; "
			"not the fio this engine was built for (%s)\n",
			found, FIO_ARRAY_SIZE(fields), AFIO_FIO_VERSION);
		return -1;
	}
	return 0;
}

static int afio_fio_check_version(void)
{
	const char *running = dlsym(RTLD_DEFAULT, "fio_version_string");

	if (!running) {
		fprintf(stderr, "fio-asyncfio: this program exports no fio_version_string; "
			"built for %s only\n", AFIO_FIO_VERSION);
		return -1;
	}
	if (strcmp(running, AFIO_FIO_VERSION)) {
		fprintf(stderr, "fio-asyncfio: built for %s, refusing to run in %s "
			"(fio's structures differ between versions; rebuild with "
			"integrations/fio/build.sh against this fio's source)\n",
			AFIO_FIO_VERSION, running);
		return -1;
	}
	return afio_fio_check_layout();
}

extern struct ioengine_ops ioengine;
static bool afio_fio_refused;

/*
 * At dlopen, before fio parses our options with its struct fio_option:
 * a fio we were not built for gets no options table and a version it
 * rejects, after our message says why.
 */
__attribute__((constructor)) static void afio_fio_load(void)
{
	if (!afio_fio_check_version())
		return;
	afio_fio_refused = true;
	ioengine.options = NULL;
	ioengine.option_struct_size = 0;
	ioengine.version = -1;
}

static void afio_fio_complete(void *data, ssize_t res)
{
	struct io_u *io_u = data;
	struct thread_data *td = io_u->engine_data;
	struct afio_fio_data *ad = td->io_ops_data;

	/* A read or write gives its bytes; a trim (fallocate) and the syncs
	   give 0 for all of them.  fio's ddir_rw() counts trims too. */
	if (res < 0)
		io_u->error = -res;
	else if ((io_u->ddir == DDIR_READ || io_u->ddir == DDIR_WRITE) &&
		 (unsigned long long)res != io_u->xfer_buflen)
		io_u->resid = io_u->xfer_buflen - res;
	ad->done[ad->nr_done++] = io_u;
}

/* fio's slat runs from the io_u's start to its issue, as fio's own engines do at commit */
static void afio_fio_mark_issued(struct thread_data *td, struct io_u **io_us, unsigned int nr)
{
	struct timespec now;
	unsigned int i;

	if (!nr)
		return;
	io_u_mark_submit(td, nr);
	if (!fio_fill_issue_time(td))
		return;
	fio_gettime(&now, NULL);
	for (i = 0; i < nr; i++) {
		io_us[i]->issue_time = now;
		io_u_queued(td, io_us[i]);
	}
	if (td->o.read_iolog_file)
		td->last_issue = now;
}

static int afio_fio_start(struct thread_data *td, struct afio_fio_data *ad, struct io_u *io_u)
{
	struct fio_file *f = io_u->file;
	const int punch = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;

	io_u->engine_data = td;
	switch (io_u->ddir) {
	case DDIR_READ:
		return afio_read(ad->ctx, f->fd, io_u->xfer_buf, io_u->xfer_buflen,
				 io_u->offset, afio_fio_complete, io_u);
	case DDIR_WRITE:
		return afio_write(ad->ctx, f->fd, io_u->xfer_buf, io_u->xfer_buflen,
				  io_u->offset, afio_fio_complete, io_u);
	case DDIR_SYNC:
		return afio_fsync(ad->ctx, f->fd, 0, afio_fio_complete, io_u);
	case DDIR_DATASYNC:
		return afio_fsync(ad->ctx, f->fd, AFIO_FSYNC_DATASYNC, afio_fio_complete, io_u);
	case DDIR_SYNC_FILE_RANGE:
		return afio_sync_range(ad->ctx, f->fd, io_u->offset, io_u->xfer_buflen,
				       td->o.sync_file_range, afio_fio_complete, io_u);
	case DDIR_TRIM:
		/* a hole in a file, a discard on a block device: fallocate does both */
		return afio_fallocate(ad->ctx, f->fd, punch, io_u->offset, io_u->xfer_buflen,
				      afio_fio_complete, io_u);
	default:
		return -EOPNOTSUPP;
	}
}

static enum fio_q_status afio_fio_queue(struct thread_data *td, struct io_u *io_u)
{
	struct afio_fio_data *ad = td->io_ops_data;
	struct afio_fio_options *o = td->eo;
	int ret;

	fio_ro_check(td, io_u);

	ret = afio_fio_start(td, ad, io_u);
	if (ret == -EAGAIN)
		return FIO_Q_BUSY;
	if (ret < 0) {
		/* fio reports it, and continue_on_error decides */
		io_u->error = -ret;
		return FIO_Q_COMPLETED;
	}
	if (o->submit_each) {
		ret = afio_submit(ad->ctx);
		if (ret < 0) {
			td_verror(td, -ret, "afio_submit");
			return FIO_Q_QUEUED;
		}
		afio_fio_mark_issued(td, &io_u, 1);
		return FIO_Q_QUEUED;
	}
	ad->pending[ad->nr_pending++] = io_u;
	return FIO_Q_QUEUED;
}

static int afio_fio_commit(struct thread_data *td)
{
	struct afio_fio_data *ad = td->io_ops_data;
	int ret;

	/* fio waits next for this request alone: afio_poll() submits it */
	if (!ad->nr_pending || (queue_full(td) && td->cur_depth == 1))
		return 0;
	ret = afio_submit(ad->ctx);
	if (ret < 0)
		return ret;
	/* what afio_submit() did not hand over yet goes with the next afio_poll() */
	afio_fio_mark_issued(td, ad->pending, ad->nr_pending);
	ad->nr_pending = 0;
	return 0;
}

static int afio_fio_timeout_ms(const struct timespec *t)
{
	if (!t)
		return -1;
	return t->tv_sec * 1000 + (t->tv_nsec + 999999) / 1000000;
}

static int afio_fio_getevents(struct thread_data *td, unsigned int min, unsigned int max,
			      const struct timespec *t)
{
	struct afio_fio_data *ad = td->io_ops_data;
	int timeout = afio_fio_timeout_ms(t);
	unsigned int ready, left;
	int ret;

	/* what fio took last time is gone; what it could not take comes first */
	ad->nr_done -= ad->nr_returned;
	memmove(ad->done, ad->done + ad->nr_returned, ad->nr_done * sizeof(*ad->done));
	ad->nr_returned = 0;
	/* what commit left goes with the afio_poll() below */
	left = ad->nr_pending;
	afio_fio_mark_issued(td, ad->pending, left);
	ad->nr_pending = 0;

	if (ad->nr_done < min || !ad->nr_done) {
		do {
			ret = afio_poll(ad->ctx, min > ad->nr_done ? min - ad->nr_done : 0,
					ad->nr_done < min ? timeout : 0);
			if (ret < 0 && ret != -EINTR)
				return ret;
		} while (ad->nr_done < min && timeout < 0);
	} else if (left) {
		ret = afio_submit(ad->ctx);
		if (ret < 0)
			return ret;
	}
	ready = ad->nr_done < max ? ad->nr_done : max;
	ad->nr_returned = ready;
	return ready;
}

static struct io_u *afio_fio_event(struct thread_data *td, int event)
{
	struct afio_fio_data *ad = td->io_ops_data;

	return ad->done[event];
}

static void afio_fio_free(struct afio_fio_data *ad)
{
	free(ad->pending);
	free(ad->done);
	free(ad);
}

static void afio_fio_report(struct thread_data *td, afio_ctx *ctx)
{
	char desc[512], clone[16] = "";

	if (afio_describe(ctx, desc, sizeof(desc)) < 0)
		snprintf(desc, sizeof(desc), "%s/%s", afio_backend_name(afio_backend(ctx)),
			 afio_mode_name(afio_mode(ctx)));
	/* every clone of numjobs has its own context, and may have fallen
	   back where the first did not */
	if (td->subjob_number)
		snprintf(clone, sizeof(clone), ".%d", td->subjob_number);
	log_info("fio-asyncfio: %s%s: %s\n", td->o.name, clone, desc);
	/* a job process leaves by _exit(): unflushed, the line would be lost */
	log_info_flush();
}

static int afio_fio_init(struct thread_data *td)
{
	struct afio_fio_options *o = td->eo;
	struct afio_fio_data *ad;
	struct afio_config cfg;
	int ret;

	if (afio_fio_refused)
		return 1;

	ad = calloc(1, sizeof(*ad));
	if (!ad)
		return 1;
	ad->depth = td->o.iodepth ? td->o.iodepth : 1;
	ad->pending = calloc(ad->depth, sizeof(*ad->pending));
	ad->done = calloc(ad->depth, sizeof(*ad->done));
	if (!ad->pending || !ad->done) {
		afio_fio_free(ad);
		return 1;
	}

	afio_config_init(&cfg);
	cfg.backend = o->backend;
	if (o->mode != AFIO_FIO_MODE_DEFAULT) {
		cfg.mode = o->mode;
		cfg.flags |= AFIO_MODE_FIXED;
	}
	cfg.entries = ad->depth;
	if (o->threads)
		cfg.threads = o->threads;
	if (o->no_fallback)
		cfg.flags |= AFIO_NO_FALLBACK;
	if (o->caller_writes)
		cfg.flags |= AFIO_CALLER_WRITES;
	ret = afio_create(&ad->ctx, &cfg);
	if (ret < 0) {
		char reason[256] = "";

		/* the probe's reason, when it has one: a backend that probes
		   well can still fail here (a limit, memory) */
		if (o->backend != AFIO_BACKEND_AUTO && !afio_probe(o->backend, reason, sizeof(reason)))
			reason[0] = '\0';
		fprintf(stderr, "fio-asyncfio: afio_create (backend %s, mode %s): %s%s%s\n",
			afio_backend_name(o->backend), afio_mode_name(cfg.mode),
			strerror(-ret), *reason ? ": " : "", reason);
		afio_fio_free(ad);
		td_verror(td, -ret, "afio_create");
		return 1;
	}
	afio_fio_report(td, ad->ctx);
	td->io_ops_data = ad;
	return 0;
}

static void afio_fio_cleanup(struct thread_data *td)
{
	struct afio_fio_data *ad = td->io_ops_data;

	if (!ad)
		return;
	/* runs what is still in flight with -ECANCELED before it returns */
	afio_destroy(ad->ctx);
	afio_fio_free(ad);
	td->io_ops_data = NULL;
}

/* fio opens a job's files with O_DIRECT or without it for good: the
   context is told so once (afio_fd_hint(3)), and does not ask the kernel
   again in each submit.  A hint refused (a file system without O_DIRECT
   where fio fell back) leaves the library asking. */
static int afio_fio_open_file(struct thread_data *td, struct fio_file *f)
{
	struct afio_fio_data *ad = td->io_ops_data;
	int ret = generic_open_file(td, f);

	if (!ret && ad && f->fd >= 0)
		(void)afio_fd_hint(ad->ctx, f->fd, td->o.odirect ? AFIO_FD_DIRECT : AFIO_FD_BUFFERED);
	return ret;
}

static int afio_fio_close_file(struct thread_data *td, struct fio_file *f)
{
	struct afio_fio_data *ad = td->io_ops_data;

	if (ad && f->fd >= 0)
		(void)afio_fd_hint(ad->ctx, f->fd, 0);
	return generic_close_file(td, f);
}

/*
 * The name fio looks up in an external engine.  No .cancel: a 0 from it
 * tells fio that the io_u is finished, and fio then frees it and may
 * close its file, while afio_cancel() only asks, and the callback comes
 * later.  Without one fio reaps what is in flight through getevents
 * before it frees anything, as with its own io_uring engine.
 */
struct ioengine_ops ioengine = {
	.name			= "asyncfio",
	.version		= FIO_IOOPS_VERSION,
	.flags			= FIO_ASYNCIO_SETS_ISSUE_TIME,
	.init			= afio_fio_init,
	.queue			= afio_fio_queue,
	.commit			= afio_fio_commit,
	.getevents		= afio_fio_getevents,
	.event			= afio_fio_event,
	.cleanup		= afio_fio_cleanup,
	.open_file		= afio_fio_open_file,
	.close_file		= afio_fio_close_file,
	.get_file_size		= generic_get_file_size,
	.options		= options,
	.option_struct_size	= sizeof(struct afio_fio_options),
};
