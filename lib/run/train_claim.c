/* ts-train's run dir: claimed for a new run or checked for --resume,
 * its config and vocab written, and the state a run starts from, new or
 * from its newest whole checkpoint. */
#include "run/trainer.h"
#include "run/train.h"
#include "data/utf8.h"
#include "data/vocab.h"
#include "format/rec.h"
#include "model/modeldir.h"
#include "run/rundir.h"
#include "util/afile.h"
#include "util/digest.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *trainer_config_text(const struct trainer *t)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	t->c->write_config(f);
	fclose(f);
	return text;
}

/* The run's copy of vocab v, and whether its data is lowercased beside a
 * vocab.txt (which the models it saves keep): the copy last, as
 * keep_vocab looks for it. */
static void save_run_vocab(const struct train_config *c, const struct vocab *v, int lower)
{
	char *copy = path_join(c->run, vocab_file_name(v));
	vocab_save_case(v, c->run, lower);
	vocab_save(v, copy);
	free(copy);
}

/* A resumed run goes back to what it began from (RUN/config's key, at path)
 * only where it must, saying why: one moved since is named as the config
 * names it, which is where to say so. */
static void check_source(const struct train_config *c, const char *key, const char *path, const char *why)
{
	if (path && access(path, F_OK) < 0) {
		const char *error = strerror(errno);
		die("%s: %s = %s: %s; %s: where it has moved, set %s there", path_join(c->run, "config"), key, path,
		    error, why, key);
	}
}

/* A resumed run keeps the copy of the vocab it made when it began (so that
 * checkpoints can come and go), or, killed before it made one, makes it now
 * from the vocab it began with. */
static void keep_vocab(const struct train_config *c, const struct manifest *man)
{
	char *copy = vocab_in_dir(c->run, NULL);
	if (access(copy, F_OK)) {
		check_source(c, c->init ? "init" : "vocab", c->init ? c->init : c->vocab,
			     "the run has no copy of its vocab yet and makes it from there");
		char *src = start_vocab(c, man->vocab_sha256, manifest_lower(man));
		struct vocab *v = vocab_load(src);
		save_run_vocab(c, v, manifest_lower(man));
		vocab_free(v);
		free(src);
	}
	free(copy);
}

/* On stderr, the checkpoints passed over from the from-th on. */
static void say_passed_over(const struct trainer *t, size_t from)
{
	for (size_t i = from; i < json_array_size(t->passed_over); i++) {
		json_t *p = json_array_get(t->passed_over, i);
		warnx("%s: passed over: %s", json_string_value(json_object_get(p, "checkpoint")),
		      json_string_value(json_object_get(p, "why")));
	}
}

/* rec_tail_read's take: keeps in *last the path of each checkpoint event,
 * forgotten at a start (a run killed before its first checkpoint starts
 * again). */
static int take_checkpoint(void *last, const msgpack_object *o)
{
	const msgpack_object *ev = mp_get(o, "event"), *path = mp_get(o, "path");
	char **p = last;
	if (mp_str_is(ev, "start") || (mp_str_is(ev, "checkpoint") && path && path->type == MSGPACK_OBJECT_STR)) {
		free(*p);
		*p = mp_str_is(ev, "start") ? NULL : strndup(path->via.str.ptr, path->via.str.size);
	}
	return 0;
}

/* A run with no checkpoint left whose events say it wrote one had them
 * removed (by hand, to free the disk): going on would train it again from
 * step 0, its evaluations replacing its best/. Refused, where a run killed
 * before its first checkpoint starts again. (A log that cannot be read is
 * for events_open to name.) */
static void check_none_removed(const char *run)
{
	char *events = path_join(run, "events.msgpack"), *last = NULL, err[256];
	struct rec_tail tail = {0};
	if (rec_tail_read(events, &tail, take_checkpoint, &last, err, sizeof err) == 0 && last)
		die("%s: no checkpoint is left in ckpt/, where the run wrote %s: --resume would train it again from "
		    "step 0, over its best/ and final/ (to train one of its models further, start a new run with --init)",
		    run, last);
	free(events);
}

/* Process 0 takes over the dir of a resumed run, which the other processes
 * then find as it left it, or checks that a new run may be made where
 * --run says. Sets *ckpt to the checkpoint a resumed run goes on from: NULL
 * for a new run, and for one killed before its first checkpoint, which
 * starts again. */
void claim_run(struct trainer *t, char **ckpt)
{
	const struct train_config *c = t->c;
	if (t->lead && c->resume) {
		rundir_attach(c->run);
		rundir_clear_stop(c->run);
		keep_vocab(c, t->man);
	} else if (t->lead) {
		rundir_check_new(c->run);
	}
	comm_barrier(t->comm);
	*ckpt = NULL;
	t->passed_over = json_array();
	if (c->resume) {   /* process 0 verifies the checkpoints, and all take its choice */
		char *mine = t->lead ? checkpoint_intact(c->run, t->passed_over, NULL) : NULL;
		if (t->lead && !mine)
			check_none_removed(c->run);
		say_passed_over(t, 0);
		char *chosen = comm_lead_text(t->comm, mine ? mine : "");
		if (*chosen)
			*ckpt = chosen;
		else
			free(chosen);
		free(mine);
	}
	if (c->resume && !*ckpt && c->init) {   /* a checkpoint has all the weights it needs of --init */
		check_source(c, "init", c->init, "with no checkpoint yet the run starts again from it");
		modeldir_verify("--init", c->init);
	}
	t->vocab_path = c->resume ? vocab_in_dir(c->run, NULL)
				  : start_vocab(c, t->man->vocab_sha256, manifest_lower(t->man));
}

/* The line of text that holds offset at: its start, and its length as the
 * return value. */
static int line_at(const char *text, size_t at, const char **start)
{
	while (at > 0 && text[at - 1] != '\n')
		at--;
	*start = text + at;
	return (int)strcspn(*start, "\n");
}

/* The SHA-256 of the data dir's manifest.json, which its records' counts,
 * tokens, lengths and labels and the shuffle's seed are in: each process
 * reads the data at its own --data, perhaps its machine's own copy. */
static void data_digest(const char *data, char hex[SHA256_HEX_SIZE])
{
	char *path = path_join(data, "manifest.json");
	struct strbuf text = {0};
	if (sb_add_file(&text, path))
		die("cannot read %s:", path);
	sha256_hex(text.s, text.n, hex);
	sb_free(&text), free(path);
}

/* Every process trains the run process 0 records: with the options of its
 * config (which all the processes of a resumed run read), on the same data
 * and from the same weights. One started otherwise would add another model's gradients to
 * the sums, or wait for sums the others never make; so all end before the
 * run dir is made, the one that differs naming its first line that does. */
void check_same_run(struct trainer *t)
{
	if (t->comm->size == 1)
		return;
	char *config = trainer_config_text(t), hex[SHA256_HEX_SIZE], data[SHA256_HEX_SIZE];
	sha256_hex(bert_params(t->m), bert_numel(t->m) * sizeof(float), hex);
	data_digest(t->c->data, data);
	struct strbuf mine = {0};
	sb_addf(&mine, "%sdata manifest.json sha256 = %.16s\nstarting weights sha256 = %.16s\n", config, data, hex);
	char *lead = comm_lead_text(t->comm, mine.s);
	size_t at = 0;
	while (mine.s[at] && mine.s[at] == lead[at])
		at++;
	int who, differs = mine.s[at] != lead[at];
	if (comm_max(t->comm, differs, &who) > 0) {
		const char *here, *there;
		int n = line_at(mine.s, at, &here), m = line_at(lead, at, &there);
		if (differs)
			die("process %d: %.*s here, %.*s on process 0 (the processes of a run must be started alike)",
			    t->comm->rank, n, here, m, there);
		die("process %d: process %d was started otherwise than process 0 (it says how)", t->comm->rank, who);
	}
	free(lead);
	sb_free(&mine);
	free(config);
}

/* Every process writes its log in the run dir process 0 made or took, whose
 * lock holds process 0's "PID HOST": one whose --run names another dir (a
 * typo, another run's) would write there, so all end, each saying why,
 * before any event is written, and a new run's dir is left as it was. */
static void check_same_dir(struct trainer *t)
{
	if (t->comm->size == 1)
		return;
	char mine[RUNDIR_LOCK_TEXT];
	rundir_lock_text(t->c->run, mine);
	int who;
	char *lead = comm_lead_text(t->comm, mine);
	int differs = strcmp(mine, lead) != 0;
	if (comm_max(t->comm, differs, &who) > 0) {
		if (t->lead && !t->c->resume)
			rundir_unmake(t->c->run);
		if (differs)
			die("process %d: --run %s is not the run dir process 0 %s (every process names the same dir)",
			    t->comm->rank, t->c->run, t->c->resume ? "resumes" : "made");
		die("process %d: process %d names another run dir than %s", t->comm->rank, who, t->c->run);
	}
	free(lead);
}

/* Once the run has passed every check, process 0 makes a new run's dir, so
 * that a run refused leaves nothing behind; then each process opens its log. */
void open_run(struct trainer *t)
{
	const struct train_config *c = t->c;
	if (t->lead && !c->resume) {
		char *config = trainer_config_text(t);
		rundir_create(c->run, config);
		free(config);
		/* the vocab checked: --vocab may be a pipe, read once */
		save_run_vocab(c, t->vocab, manifest_lower(t->man));
	}
	comm_barrier(t->comm);
	check_same_dir(t);
	free(t->vocab_path);
	t->vocab_path = path_join(c->run, vocab_file_name(t->vocab));
	char name[32];
	snprintf(name, sizeof name, "log/rank-%d.log", t->comm->rank);
	char *logpath = path_join(c->run, name);
	t->log = fopen(logpath, "a");
	if (!t->log)
		die("cannot open %s:", logpath);
	free(logpath);
}

/* The fields of a start or resume trainer_event, which plan the run, with
 * --batch-tokens's tokens a micro-batch where it has them (its
 * steps_per_epoch are then the current epoch's: each epoch's order makes
 * its own groups). */
json_t *add_batch_tokens(const struct trainer *t, json_t *fields)
{
	if (t->c->batch_tokens)
		json_object_set_new(fields, "batch_tokens", json_integer(t->c->batch_tokens));
	return fields;
}

/* The state of a run that starts afresh. */
static void fresh_state(struct trainer *t)
{
	memset(&t->st, 0, sizeof t->st);
	t->st.best_step = -1;
	t->st.processes = t->st.sched_processes = t->comm->size;
}

/* Loads the optimizer and training state of *ckpt, whose weights the model
 * has; then process 0 confirms that its large files were whole as they were
 * loaded (checkpoint_intact). Where they were not, every process loads the
 * newest intact checkpoint before it instead, which *ckpt then names. */
static void load_checkpoint(struct trainer *t, char **ckpt)
{
	int64_t records = (int64_t)shard_count(t->train.shard);
	checkpoint_load(*ckpt, records, t->o, &t->st);
	size_t known = json_array_size(t->passed_over);
	char *why = t->lead ? checkpoint_confirm(*ckpt) : NULL, *next = NULL;
	if (why) {
		json_array_append_new(t->passed_over, json_pack("{so ss}", "checkpoint", utf8_json(*ckpt), "why", why));
		next = checkpoint_intact(t->c->run, t->passed_over, *ckpt);
		say_passed_over(t, known);
		free(why);
	}
	char *chosen = comm_lead_text(t->comm, next ? next : "");
	free(next);
	if (!*chosen) {
		free(chosen);
		return;
	}
	free(*ckpt);
	*ckpt = chosen;
	reload_model(t, *ckpt);
	fresh_state(t);
	checkpoint_load(*ckpt, records, t->o, &t->st);
}

/* The line of text that sets key ("key = value"), its length the return
 * value; 0 where none does. */
static int setting(const char *text, const char *key, const char **line)
{
	size_t k = strlen(key);
	for (const char *p = text; *p; p += strcspn(p, "\n"), p += *p == '\n')
		if (!strncmp(p, key, k) && !strncmp(p + k, " = ", 3))
			return *line = p, (int)strcspn(p, "\n");
	return 0;
}

/* What text says of key: its line, or "no KEY" (malloc'd). */
static char *said(const char *text, const char *key)
{
	const char *line;
	int n = setting(text, key, &line);
	struct strbuf b = {0};
	if (n)
		sb_addf(&b, "%.*s", n, line);
	else
		sb_addf(&b, "no %s", key);
	return b.s;
}

/* The first option a differs from b in, but those of keep_out (malloc'd;
 * NULL: none). */
static char *first_change(const char *a, const char *b, const char *const *keep_out)
{
	for (const char *p = a; *p; p += strcspn(p, "\n"), p += *p == '\n') {
		char *key = strndup(p, strcspn(p, " \n"));
		int free_key = 0;
		for (int i = 0; keep_out[i]; i++)
			free_key |= !strcmp(key, keep_out[i]);
		const char *line;
		int n = setting(b, key, &line);
		if (!free_key && (n != (int)strcspn(p, "\n") || strncmp(line, p, (size_t)n)))
			return key;
		free(key);
	}
	return NULL;
}

/* Whether config text now ends the run (--epochs, --max-steps) otherwise
 * than was does. */
static int end_moved(const char *now, const char *was)
{
	static const char *const ends[] = { "epochs", "max-steps" };
	int moved = 0;
	for (int i = 0; i < 2 && !moved; i++) {
		char *a = said(now, ends[i]), *b = said(was, ends[i]);
		moved = strcmp(a, b) != 0;
		free(a), free(b);
	}
	return moved;
}

/* A resumed run trains with the options it had (RUN/config edited by hand
 * would change a run silently, and its record would not say so): process
 * 0 dies naming the first option set otherwise than when checkpoint ckpt
 * was made, but those a resume may change. Returns, on every process,
 * whether the run's end is another than when ckpt was made: a run taken
 * further, killed before its first new checkpoint, goes on. */
static int check_kept_options(struct trainer *t, const char *ckpt)
{
	char *path = path_join(ckpt, "run.config"), *now = trainer_config_text(t), *key = NULL;
	struct strbuf was = {0};
	int kept = t->lead && !sb_add_file(&was, path);
	if (t->lead && !kept && errno != ENOENT)   /* none in a checkpoint made before they kept it */
		die("cannot read %s:", path);
	if (kept && !(key = first_change(now, was.s, t->c->resume_may_change)))
		key = first_change(was.s, now, t->c->resume_may_change);
	if (key) {
		trainer_record_failures(NULL);
		char *a = said(now, key), *b = said(was.s, key);
		die("%s: %s, but %s was made with %s: a resumed run keeps its options (for others, start a new run "
		    "with --init %s)", path_join(t->c->run, "config"), a, ckpt, b, shell_quote(ckpt));
	}
	int moved = kept && end_moved(now, was.s);
	sb_free(&was), free(now), free(path);
	return comm_any(t->comm, moved);
}

/* A resume's new --max-steps or --epochs must not end the run before
 * the step it is at: refused before the run's log or events say anything,
 * and the run left as it was (a finished run is not marked failed). The
 * state's epoch counts from 0 and keeps an epoch's end in it. */
static void check_new_end(struct trainer *t)
{
	const struct train_state *st = &t->st;
	if (t->c->max_steps > 0 ? st->step <= t->c->max_steps : st->epoch < t->c->epochs)
		return;
	trainer_record_failures(NULL);
	die("%s: --%s %ld ends the run before step %ld, where it is", t->c->run,
	    t->c->max_steps > 0 ? "max-steps" : "epochs", t->c->max_steps > 0 ? t->c->max_steps : t->c->epochs,
	    st->step);
}

void start_state(struct trainer *t, char **from)
{
	char *events = path_join(t->c->run, "events.msgpack");
	fresh_state(t);
	if (t->lead) {
		t->ev = events_open(events);
		trainer_record_failures(t->ev);
	}
	if (*from)
		load_checkpoint(t, from);
	const char *ckpt = *from;
	int taken_further = ckpt && check_kept_options(t, ckpt);
	if (ckpt && t->c->resume_changes)
		check_new_end(t);
	if (ckpt)
		check_processes(t);
	if (t->lead) {   /* a TensorBoard file of the leg's own, once it is not refused */
		char *tb = path_join(t->c->run, "tb");
		t->tb = tb_open(tb);
		free(tb);
		if (t->c->resume)   /* the steps after the checkpoint come again */
			tb_restart(t->tb, t->st.step + 1);
	}
	if (ckpt) {
		size_t i;
		json_t *p;
		json_array_foreach(t->passed_over, i, p)
			trainer_log(t, "passed over %s, damaged: %s", json_string_value(json_object_get(p, "checkpoint")),
			      json_string_value(json_object_get(p, "why")));
		trainer_log(t, "resumed from %s at step %ld", ckpt, t->st.step);
	}
	if (t->c->precision != PREC_FP16)
		t->st.ls = (struct loss_scale){ 0, 0 };
	else if (!t->st.ls.scale)   /* a fresh fp16 run, or one that goes on in fp16 */
		t->st.ls = (struct loss_scale){ t->c->loss_scale, 0 };
	plan_steps(t, ckpt);
	if (taken_further || t->c->resume_changes)   /* a finished run taken further goes on */
		t->st.finished = t->st.finished && t->total_steps <= t->st.step;
	if (ckpt && t->c->resume_changes) {
		trainer_log(t, "resumed with changes %s: the run ends at step %ld", t->c->resume_changes, t->total_steps);
		if (t->lead) {   /* its config records the new end and cadence */
			char *config = trainer_config_text(t), *path = path_join(t->c->run, "config");
			afile_put_text(path, config);
			free(path);
			free(config);
		}
	}
	if (!ckpt) {
		trainer_event(t, "start", add_batch_tokens(t, json_pack("{sI sI sI sI sI ss}", "total_steps",
								(json_int_t)t->total_steps, "steps_per_epoch",
								(json_int_t)t->steps_per_epoch, "params",
								(json_int_t)bert_numel(t->m), "train_records",
								(json_int_t)shard_count(t->train.shard), "processes",
								(json_int_t)t->comm->size, "device", t->c->be->name)));
		log_parameters(t);
	}
	free(events);
	char who[96] = "", batch[48];
	if (t->comm->size > 1)
		snprintf(who, sizeof who, ", process %d of %d%s%s", t->comm->rank, t->comm->size,
			 *t->comm->net_if ? " talking over " : "", t->comm->net_if);
	if (t->c->batch_tokens)
		snprintf(batch, sizeof batch, "%ld tokens", t->c->batch_tokens);
	else
		snprintf(batch, sizeof batch, "%ld", t->c->batch);
	char blas[64] = "";
	if (t->c->be->host)
		snprintf(blas, sizeof blas, " (OpenBLAS's %s kernels)", backend_cpu_blas());
	trainer_log(t, "%ld steps (%ld per epoch), batch %s x %ld accumulation x %d processes, %zu parameters, "
	      "on %s%s%s", t->total_steps, t->steps_per_epoch, batch, t->c->accum, t->comm->size,
	      bert_numel(t->m), t->c->be->name, blas, who);
	if (t->comm->strays)
		trainer_log(t, "dropped %ld connections at MASTER_PORT that were no processes of the run while they "
		      "joined (stderr names the first)", t->comm->strays);
}
