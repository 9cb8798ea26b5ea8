#include "format/events.h"
#include "format/mpjson.h"
#include "format/rec.h"
#include "util/afile.h"
#include "util/err.h"
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct events {
	int fd;
	char *path;
	char last[32];   /* type of the last event in the log */
	msgpack_sbuffer sb;
	msgpack_packer pk;
};

/* Reads the log for its last event, and cuts off a record torn by a crash
 * mid-append, so that new events follow whole ones. */
static void recover(struct events *e)
{
	struct rec_reader *r = rec_open(e->path);
	rec_allow_torn_tail(r);
	const msgpack_object *o, *type;
	while ((o = rec_next(r)))
		if ((type = mp_get(o, "event")) && type->type == MSGPACK_OBJECT_STR)
			snprintf(e->last, sizeof e->last, "%.*s", (int)type->via.str.size, type->via.str.ptr);
	int64_t torn = rec_torn_at(r);
	rec_close(r);
	if (torn >= 0 && ftruncate(e->fd, torn) < 0)
		die("cannot truncate %s:", e->path);
}

struct events *events_open(const char *path)
{
	struct events *e = xcalloc(1, sizeof *e);
	e->path = xstrdup(path);
	e->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
	if (e->fd < 0)
		die("cannot open %s:", path);
	recover(e);
	msgpack_sbuffer_init(&e->sb);
	msgpack_packer_init(&e->pk, &e->sb, msgpack_sbuffer_write);
	return e;
}

void events_add(struct events *e, const char *type, json_t *fields)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string(type));
	json_object_set_new(ev, "time", json_real((double)ts.tv_sec + ts.tv_nsec * 1e-9));
	json_object_update(ev, fields);
	json_decref(fields);
	e->sb.size = 0;
	json_to_mp(ev, &e->pk);
	json_decref(ev);
	append_whole(e->fd, e->sb.data, e->sb.size, e->path);
	snprintf(e->last, sizeof e->last, "%s", type);
}

int events_last_is(const struct events *e, const char *type) { return !strcmp(e->last, type); }

void events_sync(struct events *e)
{
	if (fsync(e->fd) < 0)
		die("cannot write %s:", e->path);
}

void events_rename(struct events *e, const char *path)
{
	events_sync(e);
	if (rename(e->path, path) < 0)
		die("cannot rename %s to %s:", e->path, path);
	free(e->path);
	e->path = xstrdup(path);
	char *dir = xstrdup(path);
	fsync_dir(dirname(dir));
	free(dir);
}

void events_close(struct events *e)
{
	events_sync(e);
	if (close(e->fd) < 0)
		die("cannot write %s:", e->path);
	msgpack_sbuffer_destroy(&e->sb);
	free(e->path);
	free(e);
}
