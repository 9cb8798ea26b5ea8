/* bug/step-N/: what ts-train saves of a step whose loss or gradient is not
 * finite, and --replay's run of it again. */
#include "run/bugdump.h"
#include "device/device.h"
#include "eval/evaluate.h"
#include "format/mpjson.h"
#include "format/rec.h"
#include "model/hfconfig.h"
#include "model/modeldir.h"
#include "util/adir.h"
#include "util/afile.h"
#include "util/err.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static void pack_ints(msgpack_packer *pk, const char *key, const int32_t *v, size_t n)
{
	mp_pack_str(pk, key);
	msgpack_pack_array(pk, n);
	for (size_t i = 0; i < n; i++)
		msgpack_pack_int32(pk, v[i]);
}

/* The targets a bug record of B sequences holds: reg and multi's. */
static size_t bug_targets(enum bert_task task, int B, int num_labels)
{
	return task == TASK_REG ? (size_t)B : task == TASK_MULTI ? (size_t)B * num_labels : 0;
}

char *bug_dump(const struct bug_step *s)
{
	char name[48];
	snprintf(name, sizeof name, "bug/step-%ld", s->step);
	char *bug = path_join(s->run, "bug"), *dir = path_join(s->run, name);
	mkdir(bug, 0777);
	struct adir *d = adir_begin(dir, 1, NULL);
	modeldir_write(adir_tmp(d), s->m, s->labels, s->nlabels, s->vocab);
	char *path = path_join(adir_tmp(d), "batch.msgpack");
	struct rec_writer *w = rec_create(path);
	msgpack_packer *pk = rec_packer(w);
	for (int k = 0; k < s->nmicro; k++) {
		const struct batch *b = &s->micro[k];
		size_t cells = (size_t)b->B * b->T, ntargets = bug_targets(s->task, b->B, s->num_labels);
		msgpack_pack_map(pk, 12 + (ntargets > 0));
		mp_pack_str(pk, "step"), msgpack_pack_long(pk, s->step);
		mp_pack_str(pk, "precision"), mp_pack_str(pk, precision_name(s->precision));
		mp_pack_str(pk, "task"), mp_pack_str(pk, task_name(s->task));
		mp_pack_str(pk, "num_labels"), msgpack_pack_int(pk, s->num_labels);
		mp_pack_str(pk, "B"), msgpack_pack_int(pk, b->B);
		mp_pack_str(pk, "T"), msgpack_pack_int(pk, b->T);
		mp_pack_str(pk, "seed"), msgpack_pack_uint64(pk, s->seeds[k]);
		mp_pack_str(pk, "scale"), msgpack_pack_float(pk, s->scale);
		pack_ints(pk, "ids", b->ids, cells);
		pack_ints(pk, "types", b->types, cells);
		mp_pack_str(pk, "mask");
		msgpack_pack_array(pk, cells);
		for (size_t i = 0; i < cells; i++)
			msgpack_pack_uint8(pk, b->mask[i]);
		pack_ints(pk, "labels", b->labels, bert_task_pooled(s->task) ? (size_t)b->B : cells);
		if (ntargets) {
			mp_pack_str(pk, "targets");
			msgpack_pack_array(pk, ntargets);
			for (size_t i = 0; i < ntargets; i++)
				msgpack_pack_float(pk, b->targets[i]);
		}
	}
	rec_commit(w);
	adir_commit(d);
	free(path);
	free(dir);
	free(bug);
	return xstrdup(name);
}

/* What a bug record may hold: at most a batch and a sequence ts-train takes. */
enum { MAX_REPLAY_BATCH = 1 << 20, MAX_REPLAY_LEN = 32768 };

/* An integer of a bug record in [min, max]. */
static int64_t int_in(const struct rec_reader *r, const msgpack_object *o, const char *key, int64_t min,
		      int64_t max)
{
	int ok = (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= (uint64_t)max) ||
		 (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o->via.i64 <= max);
	if (!ok || o->via.i64 < min)
		rec_die(r, "'%s' holds a value that is not an integer from %lld to %lld", key, (long long)min,
			(long long)max);
	return o->via.i64;
}

static int32_t *read_ints(const struct rec_reader *r, const msgpack_object *rec, const char *key, size_t want,
			  int32_t min, int32_t max)
{
	const msgpack_object *o = mp_get(rec, key);
	if (!o || o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != want)
		rec_die(r, "'%s' is missing or has the wrong length", key);
	int32_t *v = xmalloc((want ? want : 1) * sizeof *v);
	for (size_t i = 0; i < want; i++)
		v[i] = (int32_t)int_in(r, &o->via.array.ptr[i], key, min, max);
	return v;
}

/* want floats under key, or NULL when want is 0. */
static float *read_floats(const struct rec_reader *r, const msgpack_object *rec, const char *key, size_t want)
{
	if (!want)
		return NULL;
	const msgpack_object *o = mp_get(rec, key);
	if (!o || o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != want)
		rec_die(r, "'%s' is missing or has the wrong length", key);
	float *v = xmalloc(want * sizeof *v);
	for (size_t i = 0; i < want; i++) {
		const msgpack_object *x = &o->via.array.ptr[i];
		if (x->type != MSGPACK_OBJECT_FLOAT32 && x->type != MSGPACK_OBJECT_FLOAT64)
			rec_die(r, "'%s' holds a value that is not a number", key);
		v[i] = (float)x->via.f64;
	}
	return v;
}

static int64_t read_int(const struct rec_reader *r, const msgpack_object *rec, const char *key, int64_t min,
			int64_t max)
{
	const msgpack_object *o = mp_get(rec, key);
	if (!o)
		rec_die(r, "'%s' is missing", key);
	return int_in(r, o, key, min, max);
}

/* The dropout seed: any uint64. */
static uint64_t read_seed(const struct rec_reader *r, const msgpack_object *rec)
{
	const msgpack_object *o = mp_get(rec, "seed");
	if (!o || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		rec_die(r, "'seed' is missing or not a non-negative integer");
	return o->via.u64;
}

/* The precision the step ran in, as the CPU can replay it: fp32 for records
 * from before bf16, and for tf32 (fp32 is the CPU's nearest). */
static enum precision read_precision(const struct rec_reader *r, const msgpack_object *rec)
{
	const msgpack_object *o = mp_get(rec, "precision");
	if (!o || mp_str_is(o, "fp32") || mp_str_is(o, "tf32"))
		return PREC_FP32;
	if (mp_str_is(o, "fp16"))
		rec_die(r, "the step ran in fp16, which the CPU does not have: it replays in fp32, bf16 or tf32 only");
	if (!mp_str_is(o, "bf16"))
		rec_die(r, "'precision' is not fp32, tf32, bf16 or fp16");
	return PREC_BF16;
}

/* Runs one saved micro-batch forward and backward; returns its share of the step's mean loss. */
static double replay_micro(struct bert **m, const char *dir, const struct rec_reader *r, const msgpack_object *rec)
{
	const msgpack_object *task = mp_get(rec, "task"), *scale = mp_get(rec, "scale");
	if (!task || task->type != MSGPACK_OBJECT_STR || !scale ||
	    (scale->type != MSGPACK_OBJECT_FLOAT32 && scale->type != MSGPACK_OBJECT_FLOAT64))
		rec_die(r, "not a bug record");
	int tk = TASK_CLS;
	while (tk <= TASK_TOKCLS && !mp_str_is(task, task_name((enum bert_task)tk)))
		tk++;
	if (tk > TASK_TOKCLS)
		rec_die(r, "not a bug record: unknown task");
	int B = (int)read_int(r, rec, "B", 1, MAX_REPLAY_BATCH), T = (int)read_int(r, rec, "T", 1, MAX_REPLAY_LEN);
	int num_labels = (int)read_int(r, rec, "num_labels", 0, INT32_MAX);
	if (!*m) {
		char **names = NULL;
		int n = 0;
		modeldir_verify("--replay", dir);
		*m = modeldir_load(dir, backend_open("cpu", read_precision(r, rec)), (enum bert_task)tk,
				   num_labels, NULL, &names, &n);
		hfconfig_free_labels(names, n);
		bert_zero_grads(*m);
	}
	size_t cells = (size_t)B * T;
	int32_t *ids = read_ints(r, rec, "ids", cells, 0, INT32_MAX);
	int32_t *types = read_ints(r, rec, "types", cells, 0, INT32_MAX);
	int32_t *mask32 = read_ints(r, rec, "mask", cells, 0, 1);
	int32_t *labels = read_ints(r, rec, "labels", bert_task_pooled((enum bert_task)tk) ? (size_t)B : cells, -100, INT32_MAX);
	uint8_t *mask = xmalloc(cells);
	for (size_t i = 0; i < cells; i++)
		mask[i] = (uint8_t)mask32[i];
	float *targets = read_floats(r, rec, "targets", bug_targets((enum bert_task)tk, B, num_labels));
	struct bert_batch b = {B, T, ids, types, mask, labels, targets};
	int64_t count;
	double loss = bert_forward(*m, &b, 1, (uint64_t)read_seed(r, rec), &count);
	bert_backward(*m, (float)scale->via.f64);
	free(ids), free(types), free(mask32), free(labels), free(mask), free(targets);
	return loss * scale->via.f64;
}

int bug_replay(const char *bugdir)
{
	char *path = path_join(bugdir, "batch.msgpack");
	struct rec_reader *r = rec_open(path);
	struct bert *m = NULL;
	double loss = 0;
	int64_t step = -1;
	const msgpack_object *rec;
	while ((rec = rec_next(r))) {
		step = read_int(r, rec, "step", 1, INT64_MAX);
		loss += replay_micro(&m, bugdir, r, rec);
	}
	if (!m)
		die("%s: no batch to replay", path);
	double norm = bert_grad_norm(m);
	bert_pull(m);
	json_t *bad = json_array();
	int n = bert_tensors(m, NULL);
	struct tensor_ref *refs = xcalloc((size_t)n, sizeof *refs);
	bert_tensors(m, refs);
	const float *g = bert_grads(m), *p0 = bert_params(m);
	for (int i = 0; i < n; i++) {
		const float *gi = g + (refs[i].data - p0);
		for (int64_t k = 0; k < tensor_numel(&refs[i]); k++)
			if (!isfinite(gi[k])) {
				char name[256];
				modeldir_tensor_name(bert_config_of(m), refs[i].name, name, sizeof name);
				json_array_append_new(bad, json_string(name));
				break;
			}
	}
	int reproduced = !isfinite(loss) || !isfinite(norm);
	json_t *j = json_pack("{sI so so sb so}", "step", (json_int_t)step, "loss", json_number(loss), "grad_norm",
			      json_number(norm), "reproduced", reproduced, "nonfinite_grads", bad);
	char *text = json_dumps(j, JSON_COMPACT);
	printf("%s\n", text);
	free(text);
	json_decref(j);
	free(refs);
	rec_close(r);
	bert_free(m);
	free(path);
	if (!reproduced)
		warnx("%s: the loss and gradient are finite this time", bugdir);
	return reproduced ? 0 : 1;
}
