#include "events.h"
#include "afile.h"
#include "err.h"
#include "mpjson.h"
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct events {
	int fd;
	char *path;
	msgpack_sbuffer sb;
	msgpack_packer pk;
};

struct events *events_open(const char *path)
{
	struct events *e = xcalloc(1, sizeof *e);
	e->path = xstrdup(path);
	e->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (e->fd < 0)
		die("cannot open %s:", path);
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
	write_all(e->fd, e->sb.data, e->sb.size, e->path);
}

void events_close(struct events *e)
{
	fsync(e->fd);
	close(e->fd);
	msgpack_sbuffer_destroy(&e->sb);
	free(e->path);
	free(e);
}
