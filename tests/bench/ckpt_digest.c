/* Benchmark driver for tests/bench/checkpoint: what the digests of a
 * checkpoint (format/dirdigest.h) add to saving and loading one. It saves a
 * BERT-base model with AdamW's moments as ts-train does (checkpoint_save:
 * the weights pulled from the backend, model.safetensors, config.json, the
 * vocab, optimizer.safetensors and state.json, each fsynced, the dir made
 * atomically, the large files hashed as they are written and the digests
 * written last), and loads it as a resume does (checkpoint_intact, which
 * checks the digests of all but the weights' and moments' files, and of
 * those the first MiB, keeping their mappings; then modeldir_load and
 * checkpoint_load, which take them and check the rest as they copy it,
 * and checkpoint_confirm).
 * The save is timed with its hashing and without it (libxxhash's update,
 * which all hashing calls, is passed by: this driver defines it, forwarding
 * to the library's); the digests.json the save then writes anyway is timed
 * apart, and counted as digests' work too.
 * The load is timed whole, with the check and without (the files mapped,
 * as before there were digests): from the page cache (the digests' worst
 * case), each pair one after the other, the median of the pairs' ratios
 * beside the ratio of the bests (this machine's speed drifts from one
 * moment to the next); and, as root, from the disk too (the page cache
 * emptied first).
 * SHA-256 of the same files is timed too, the slower choice.
 * Prints "key value" lines.
 *   ckpt_digest DIR VOCAB [--layers N] [--reps R]
 * DIR: a run dir for the checkpoints (removed after); VOCAB: a vocab.txt of
 * BERT's 30,522 tokens; N: encoder layers (12, BERT-base's); R: each timing
 * the best of R. */
#include "backend/backend.h"
#include "model/bert.h"
#include "model/modeldir.h"
#include "model/optim.h"
#include "run/checkpoint.h"
#include "format/dirdigest.h"
#include "util/afile.h"
#include "util/clock.h"
#include "util/digest.h"
#include "util/filedigest.h"
#include "util/err.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#ifdef TS_XXH_DISPATCH
#include <xxh_x86dispatch.h>
#endif

#define NAME_OF(f) NAME_TEXT(f)   /* the name f stands for, as text */
#define NAME_TEXT(f) #f

static int arg(const char *name, const char *text, int min, int max)
{
	char *end;
	errno = 0;
	long v = strtol(text, &end, 10);
	if (errno || end == text || *end || v < min || v > max)
		die_usage("%s wants a whole number from %d to %d, not '%s'", name, min, max, text);
	return (int)v;
}

static struct optim *adamw(struct bert *m)
{
	int n = bert_tensors(m, NULL);
	struct tensor_ref *refs = xcalloc((size_t)n, sizeof *refs);
	unsigned char *decays = xcalloc((size_t)n, 1);
	bert_tensors(m, refs);
	for (int i = 0; i < n; i++)
		decays[i] = (unsigned char)bert_decays(refs[i].name);
	struct optim_config c = { .kind = OPTIM_ADAMW, .weight_decay = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8 };
	struct optim *o = optim_new(&c, bert_backend(m), refs, decays, n, bert_params(m), bert_backend_params(m),
				    bert_backend_grads(m));
	free(refs);
	free(decays);
	return o;
}

/* SHA-256 of each file of the checkpoint dir ck. */
static void sha256_dir(const char *ck)
{
	const char *names[] = { "model.safetensors", "optimizer.safetensors", "config.json", "state.json", "vocab.txt" };
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		char *path = path_join(ck, names[i]), hex[SHA256_HEX_SIZE];
		int fd = open(path, O_RDONLY);
		struct stat sb;
		if (fd < 0 || fstat(fd, &sb))
			die("%s:", path);
		void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
		if (p == MAP_FAILED)
			die("%s:", path);
		sha256_hex(p, (size_t)sb.st_size, hex);
		munmap(p, (size_t)sb.st_size);
		close(fd);
		free(path);
	}
}

/* Empties the page cache (root only), so that what comes next reads the
 * disk; 0 where it cannot. */
static int drop_caches(void)
{
	sync();
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	int ok = fd >= 0 && write(fd, "3", 1) == 1;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* A resume's loads of the checkpoint ck: the model and the optimizer state;
 * where checked, what the loads checked then confirmed. */
static void load(const char *ck, int checked)
{
	struct bert *m = modeldir_load(ck, backend_cpu(), TASK_CLS, 0, NULL, NULL, NULL);
	struct optim *o = adamw(m);
	struct train_state st;
	checkpoint_load(ck, 0, o, &st);
	char *why = checked ? checkpoint_confirm(ck) : NULL;
	if (why)
		die("%s: the checkpoint just saved does not check: %s", ck, why);
	optim_free(o);
	bert_free(m);
}

/* checkpoint_intact on run: its newest checkpoint, which must be whole. */
static char *intact(const char *run)
{
	json_t *skipped = json_array();
	char *found = checkpoint_intact(run, skipped, NULL);
	if (!found || json_array_size(skipped))
		die("%s: the checkpoint just saved does not check", run);
	json_decref(skipped);
	return found;
}

static int skip_hashing;

/* libxxhash's update, passed by while skip_hashing is set. Calls to it from
 * the library bind here, this program defining it. */
XXH_errorcode XXH3_128bits_update(XXH3_state_t *st, const void *p, size_t n)
{
	static XXH_errorcode (*real)(XXH3_state_t *, const void *, size_t);
	if (!real && !(real = (XXH_errorcode (*)(XXH3_state_t *, const void *, size_t))
		       dlsym(RTLD_NEXT, NAME_OF(XXH3_128bits_update))))
		die("libxxhash has no %s", NAME_OF(XXH3_128bits_update));
	return skip_hashing ? XXH_OK : real(st, p, n);
}

/* checkpoint_save as ts-train calls it: the time it takes. */
static double time_save(const char *run, struct bert *m, struct optim *o, const struct train_state *st,
			const char *vocab)
{
	double t0 = clock_seconds();
	checkpoint_save(run, m, o, st, NULL, 0, vocab, "", 1);
	return clock_seconds() - t0;
}

static double best_of(double a, double b)
{
	return a < b ? a : b;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	ts_prog = "ckpt_digest";
	if (argc < 3 || argv[1][0] == '-' || argv[2][0] == '-')
		die_usage("usage: ckpt_digest DIR VOCAB [--layers N] [--reps R]");
	const char *run = argv[1], *vocab = argv[2];
	int layers = 12, reps = 3;
	for (int i = 3; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--layers"))
			layers = arg("--layers", argv[i + 1], 1, 48);
		else if (!strcmp(argv[i], "--reps"))
			reps = arg("--reps", argv[i + 1], 1, 100);
		else
			die_usage("unknown option %s", argv[i]);
	}
	struct bert_config c = { .vocab = 30522, .hidden = 768, .layers = layers, .heads = 12, .ffn = 3072,
				 .max_pos = 512, .type_vocab = 2, .ln_eps = 1e-12f, .hidden_dropout = 0.1f,
				 .attn_dropout = 0.1f, .cls_dropout = 0.1f, .task = TASK_CLS, .num_labels = 2 };
	const struct backend *cpu = backend_cpu();
	struct bert *m = bert_new(&c, cpu);
	bert_init(m, 1);
	struct optim *o = adamw(m);
	struct train_state st = { .step = 1, .best_step = -1, .processes = 1, .sched_processes = 1 };
	double save = 1e30, plain = 1e30, record = 1e30, load_s = 1e30, check_load = 1e30, sha = 1e30,
	       cold = 1e30, cold_check = 1e30;
	double bytes = 0, *pair = xmalloc((size_t)reps * sizeof *pair);
	int can_drop = 1;
	for (int r = 0; r < reps; r++) {   /* each pair timed in turn, the first of it by turns */
		char *ck = path_join(run, "ckpt/step-1");
		for (int k = 0; k < 2; k++) {
			skip_hashing = (k + r) % 2;
			double t = time_save(run, m, o, &st, vocab);
			if (skip_hashing) {
				plain = best_of(plain, t);
				double t0 = clock_seconds();
				dirdigest_write(ck);
				record = best_of(record, clock_seconds() - t0);
			} else {
				save = best_of(save, t);
			}
		}
		skip_hashing = 0;
		checkpoint_save(run, m, o, &st, NULL, 0, vocab, "", 1);   /* its digests true again */
		double took[2];
		load(ck, 0);   /* the first load after the saves is the slowest, whichever it is */
		for (int k = 0; k < 2; k++) {
			int checked = (k + r) % 2;
			double t0 = clock_seconds();
			if (checked)
				free(intact(run));
			load(ck, checked);
			took[checked] = clock_seconds() - t0;
		}
		load_s = best_of(load_s, took[0]);
		check_load = best_of(check_load, took[1]);
		pair[r] = took[1] / took[0];
		double t0 = clock_seconds();
		sha256_dir(ck);
		sha = best_of(sha, clock_seconds() - t0);
		/* from the disk: the load alone, then the digests checked and the load */
		can_drop = can_drop && drop_caches();
		if (can_drop) {
			t0 = clock_seconds();
			load(ck, 0);
			cold = best_of(cold, clock_seconds() - t0);
			drop_caches();
			t0 = clock_seconds();
			free(intact(run));
			load(ck, 1);
			cold_check = best_of(cold_check, clock_seconds() - t0);
		}
		struct stat s1, s2;
		char *mp = path_join(ck, "model.safetensors"), *op = path_join(ck, "optimizer.safetensors");
		if (!stat(mp, &s1) && !stat(op, &s2))
			bytes = (double)s1.st_size + (double)s2.st_size;
		free(mp), free(op), free(ck);
	}
	remove_tree(run);
	double bare = plain - record;   /* the save without any digests' work */
	printf("bytes %.0f\nsave_s %.3f\nbare_save_s %.3f\nrecord_s %.4f\nload_s %.3f\ncheck_load_s %.3f\n", bytes,
	       save, bare, record, load_s, check_load);
	qsort(pair, (size_t)reps, sizeof *pair, by_value);
	printf("sha256_s %.3f\nsave_slower %.4f\nload_slower %.4f\nsha256_save_slower %.4f\nsha256_load_slower %.4f\n",
	       sha, save / bare - 1, check_load / load_s - 1, sha / bare, sha / load_s);
	printf("pair_load_slower %.4f\n", (pair[(reps - 1) / 2] + pair[reps / 2]) / 2 - 1);
	free(pair);
	if (can_drop)
		printf("cold_load_s %.3f\ncold_check_load_s %.3f\ncold_load_slower %.4f\n", cold, cold_check,
		       cold_check / cold - 1);
	close_stdout();
	return 0;
}
