/* safetensors: round trip, the dtypes Python writes, and refusal of corrupt files.
 * usage: test_safetensors [FIXTURE_DIR]   (default tests/fixtures/hf) */
#include "check.h"
#include "expect_die.h"
#include "format/dirdigest.h"
#include "format/safetensors.h"
#include "testfiles.h"
#include "util/afile.h"
#include "util/err.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/ts-test-st.XXXXXX";
static const char *fixdir = "tests/fixtures/hf";

/* A file with the given JSON header and n zero bytes of data. */
static void write_raw(const char *path, const char *header, size_t n)
{
	uint64_t len = strlen(header);
	unsigned char *buf = xcalloc(8 + len + n, 1);
	memcpy(buf, &len, 8);
	memcpy(buf + 8, header, len);
	write_file(path, buf, 8 + len + n);
	free(buf);
}

static void test_round_trip(void)
{
	float a[6] = {1, -2, 3.5f, 1e-30f, -0.0f, 7}, b[3] = {0.25f, 0.5f, 0.75f}, c[1] = {42};
	struct tensor_ref t[3] = {
		{"encoder.a.weight", 2, {2, 3}, a},
		{"b", 1, {3}, b},
		{"scalar", 0, {0}, c},
	};
	char *path = path_join(tmpdir, "rt.safetensors");
	st_write(path, t, 3);
	struct st_file *f = st_open(path);
	CHECK(st_count(f) == 3, "round trip: 3 tensors (got %d)", st_count(f));
	for (int i = 0; i < 3 && i < st_count(f); i++) {
		const struct st_tensor *s = st_get(f, i);
		int same = !strcmp(s->name, t[i].name) && s->dtype == ST_F32 && s->ndim == t[i].ndim &&
			   s->nbytes == (size_t)tensor_numel(&t[i]) * 4 &&
			   !memcmp(s->data, t[i].data, s->nbytes);
		for (int d = 0; same && d < s->ndim; d++)
			same = s->shape[d] == t[i].shape[d];
		CHECK(same, "round trip: %s keeps its place, name, shape and bits", t[i].name);
	}
	CHECK(st_find(f, "b") == st_get(f, 1) && !st_find(f, "c"), "st_find by name");
	float back[3];
	st_to_f32(st_find(f, "b"), back);
	CHECK(!memcmp(back, b, sizeof b), "st_to_f32 of F32 copies the values");
	st_close(f);

	FILE *raw = fopen(path, "rb");
	uint64_t hlen = 0;
	char header[1024] = {0};
	CHECK(raw && fread(&hlen, 8, 1, raw) == 1 && hlen < sizeof header &&
	      fread(header, 1, hlen, raw) == hlen, "round trip: header readable");
	if (raw)
		fclose(raw);
	CHECK(hlen % 8 == 0, "header length %llu is a multiple of 8", (unsigned long long)hlen);
	CHECK(strstr(header, "\"__metadata__\":{\"format\":\"pt\"}") != NULL,
	      "header carries format pt for transformers");
	unlink(path);
	free(path);
}

/* F16, BF16 and F64 written by torch, against torch's own conversion to F32. */
static void test_python_dtypes(void)
{
	char *path = path_join(fixdir, "dtypes.safetensors");
	struct st_file *f = st_open(path);
	const char *names[] = {"f16", "bf16", "f64"};
	const int want_dtype[] = {ST_F16, ST_BF16, ST_F64};
	for (int k = 0; k < 3; k++) {
		char ref_name[32];
		snprintf(ref_name, sizeof ref_name, "%s_as_f32", names[k]);
		const struct st_tensor *t = st_find(f, names[k]), *ref = st_find(f, ref_name);
		if (!t || !ref || t->dtype != want_dtype[k] || ref->dtype != ST_F32) {
			CHECK(0, "%s: tensors %s and %s present with their dtypes", path, names[k], ref_name);
			continue;
		}
		size_t n = ref->nbytes / 4;
		float *got = xmalloc(n * 4), *want = xmalloc(n * 4);
		st_to_f32(t, got);
		st_to_f32(ref, want);
		int same = 1;
		for (size_t i = 0; i < n; i++)
			same &= isnan(want[i]) ? isnan(got[i]) : !memcmp(&got[i], &want[i], 4);
		CHECK(same, "%s to f32 matches torch bit for bit (%zu values incl. subnormals, inf, nan, -0)",
		      names[k], n);
		free(got);
		free(want);
	}
	const struct st_tensor *i64 = st_find(f, "i64");
	CHECK(i64 && i64->dtype == ST_I64 && i64->ndim == 2 && i64->shape[0] == 2 && i64->shape[1] == 3,
	      "an I64 tensor is read with its shape");
	st_close(f);
	free(path);
}

static void open_file(const void *path)
{
	st_open(path);
}

/* As open_file, but killed by SIGALRM after 10 s: a FIFO must not hang it. */
static void open_file_soon(const void *path)
{
	alarm(10);
	st_open(path);
}

static void convert_i64(const void *path)
{
	struct st_file *f = st_open(path);
	float out[6];
	st_to_f32(st_find(f, "i64"), out);
}

/* Empty tensors hold no bytes: at any offset, even another's start or
 * inside it, they overlap nothing. */
static void test_empty_tensors(void)
{
	char *path = path_join(tmpdir, "empty.safetensors");
	write_raw(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
		  "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]},"
		  "\"f\":{\"dtype\":\"F32\",\"shape\":[2,0],\"data_offsets\":[4,4]}}", 12);
	struct st_file *f = st_open(path);
	CHECK(st_count(f) == 4 && st_find(f, "e")->nbytes == 0 && st_find(f, "f")->nbytes == 0,
	      "empty tensors at another's start or inside it are no overlap");
	st_close(f);
	unlink(path);
	free(path);
}

struct corruption { const char *what, *header; size_t datasize; const char *why; };

static void test_corrupt_files(void)
{
	static const struct corruption cases[] = {
		{"header not JSON", "{\"a\": {\"dtype\": \"F32\",", 0, "not JSON"},
		{"header a JSON array", "[1, 2]", 0, "not a JSON object"},
		{"unknown dtype", "{\"a\":{\"dtype\":\"F31\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
		 "unknown dtype F31"},
		{"offsets beyond the data", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
		 "out of range"},
		{"offsets reversed", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4,
		 "out of range"},
		{"size not shape*dtype", "{\"a\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
		 "8 bytes for 3 values of F16"},
		{"overlapping tensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		 "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "overlap"},
		{"negative size", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
		 "non-size"},
		{"a shape past 2^63 values", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
		 "\"data_offsets\":[0,16]}}", 16, "tensor a: its shape holds more values than a file can"},
		{"duplicate names", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		 "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "not JSON"},
		{"no data_offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "data_offsets"},
	};
	char *path = path_join(tmpdir, "bad.safetensors");
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		write_raw(path, cases[i].header, cases[i].datasize);
		char what[128];
		snprintf(what, sizeof what, "corrupt file refused: %s", cases[i].what);
		expect_die(what, open_file, path, cases[i].why);
	}

	write_file(path, "\x10\0\0\0", 4);
	expect_die("corrupt file refused: 4-byte file", open_file, path, "shorter than the 8-byte");
	uint64_t huge = 1000;
	write_file(path, &huge, 8);
	expect_die("corrupt file refused: header length beyond the file", open_file, path,
		   "beyond the end of the file");
	expect_die("missing file refused", open_file, "/nonexistent/x.safetensors",
		   "cannot open /nonexistent/x.safetensors: No such file");

	/* a real file cut short: the last tensor's range runs past the end */
	float w[64] = {0};
	struct tensor_ref t = {"w", 2, {8, 8}, w};
	st_write(path, &t, 1);
	struct stat sb;
	if (stat(path, &sb) < 0 || truncate(path, sb.st_size - 10) < 0)
		die("cannot truncate %s:", path);
	expect_die("truncated file refused", open_file, path, "corrupt safetensors header: tensor w");
	unlink(path);
	free(path);

	/* a directory or a FIFO where the file should be */
	char *dir = path_join(tmpdir, "dir.safetensors"), *fifo = path_join(tmpdir, "fifo.safetensors");
	if (mkdir(dir, 0755) < 0 || mkfifo(fifo, 0644) < 0)
		die("cannot make %s or %s:", dir, fifo);
	expect_die("a directory refused", open_file, dir, "dir.safetensors: not a regular file");
	expect_die("a FIFO refused at once", open_file_soon, fifo, "fifo.safetensors: not a regular file");
	rmdir(dir), unlink(fifo);
	free(dir), free(fifo);

	char *dt = path_join(fixdir, "dtypes.safetensors");
	expect_die("st_to_f32 refuses an integer tensor, naming its file", convert_i64, dt, "dtypes.safetensors: tensor i64 has dtype I64");
	free(dt);
}

/* The check of a model dir's weights when a digests' check read only their
 * head: made as st_to_f32 copies the tensors, in the file's order or not,
 * and ended by st_checked or st_close; what dirdigest_confirm then says. */
enum { BIG_N = 300000 };   /* floats: 1.2 MB, more than the head */

/* Loads dir/w.safetensors after a check with heads: its tensors in order
 * (-1 ends it), into *same whether they have the values written, into
 * *intact what st_checked found (-1: the check refused the dir); the
 * verdict of dirdigest_confirm after, the reason into why (size bytes). */
static enum digests load_checked(const char *dir, const int *order, const float *const *want, const size_t *nvals,
				 int *same, int *intact, char *why, size_t size)
{
	static const char *const keep[] = { "w.safetensors", NULL };
	char *w, *path = path_join(dir, "w.safetensors");
	enum digests d = dirdigest_check(dir, keep, 1, &w);
	*same = 1;
	*intact = -1;
	if (d == DIGESTS_OK) {
		struct st_file *f = st_open(path);
		for (int k = 0; order[k] >= 0; k++) {
			float *out = xmalloc(nvals[order[k]] * sizeof *out);
			st_to_f32(st_get(f, order[k]), out);
			*same &= !memcmp(out, want[order[k]], nvals[order[k]] * sizeof *out);
			free(out);
		}
		*intact = st_checked(f);
		st_close(f);
		free(w);
		d = dirdigest_confirm(dir, keep, &w);
	}
	snprintf(why, size, "%s", w ? w : "");
	free(w);
	free(path);
	return d;
}

static void flip(const char *path, off_t at)
{
	int fd = open(path, O_RDWR);
	unsigned char c;
	if (fd < 0 || pread(fd, &c, 1, at) != 1)
		die("%s:", path);
	c ^= 0x40;
	if (pwrite(fd, &c, 1, at) != 1 || close(fd))
		die("%s:", path);
}

static void test_checked_as_copied(void)
{
	float *a = xmalloc(BIG_N * sizeof *a), b[5] = {1, 2, 3, 4, 5}, *c = xmalloc(BIG_N * sizeof *c);
	for (int i = 0; i < BIG_N; i++)
		a[i] = (float)i * 0.5f, c[i] = -(float)i;
	struct tensor_ref t[3] = { {"a", 1, {BIG_N}, a}, {"b", 1, {5}, b}, {"c", 1, {BIG_N}, c} };
	const float *const want[3] = { a, b, c };
	const size_t nvals[3] = { BIG_N, 5, BIG_N };
	char *dir = path_join(tmpdir, "checked"), *path = path_join(dir, "w.safetensors"), why[256];
	mkdir(dir, 0755);
	st_write(path, t, 3);
	dirdigest_write(dir);
	int same, intact;
	static const int in_order[] = { 0, 1, 2, -1 }, backwards[] = { 2, 1, 0, -1 }, first_only[] = { 0, -1 };
	CHECK(load_checked(dir, in_order, want, nvals, &same, &intact, why, sizeof why) == DIGESTS_OK && same && intact == 1,
	      "checked as copied, in the file's order: the values, and intact (%s)", why);
	CHECK(load_checked(dir, backwards, want, nvals, &same, &intact, why, sizeof why) == DIGESTS_OK && same && intact == 1,
	      "checked as copied, backwards: the values, and intact (%s)", why);
	CHECK(load_checked(dir, first_only, want, nvals, &same, &intact, why, sizeof why) == DIGESTS_OK && same && intact == 1,
	      "one tensor of three copied: the rest checked at the close, intact (%s)", why);
	struct stat sb;
	stat(path, &sb);
	flip(path, sb.st_size - 7);   /* in c, past the head */
	CHECK(load_checked(dir, in_order, want, nvals, &same, &intact, why, sizeof why) == DIGESTS_BAD && !same && !intact &&
	      !strcmp(why, "w.safetensors differs from what was written (its digest does not match)"),
	      "a byte flipped past the head: found as it is copied (%s)", why);
	CHECK(load_checked(dir, backwards, want, nvals, &same, &intact, why, sizeof why) == DIGESTS_BAD && !intact,
	      "and copied backwards (%s)", why);
	flip(path, sb.st_size - 7);
	flip(path, 20);   /* in the header */
	CHECK(load_checked(dir, in_order, want, nvals, &same, &intact, why, sizeof why) == DIGESTS_BAD && intact == -1 &&
	      !strcmp(why, "w.safetensors differs from what was written (its digest does not match)"),
	      "a byte flipped in the header: found by the check of the head, before the header is read (%s)", why);
	flip(path, 20);
	unlink(path);
	char *digests = path_join(dir, DIGESTS_FILE);
	unlink(digests);
	rmdir(dir);
	free(digests), free(dir), free(path), free(a), free(c);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		fixdir = argv[1];
	if (!mkdtemp(tmpdir))
		die("cannot create %s:", tmpdir);
	test_round_trip();
	test_python_dtypes();
	test_empty_tensors();
	test_corrupt_files();
	test_checked_as_copied();
	rmdir(tmpdir);
	CHECK_DONE();
}
