#include "format/safetensors.h"
#include "format/dirdigest.h"
#include "util/afile.h"
#include "util/copyhash.h"
#include "util/err.h"
#include "util/filedigest.h"
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this code reads it in place"
#endif

/* check: where a digests' check kept the mapping with its head checked,
 * the rest's digest as far as it is taken, which must come to want. */
struct st_file {
	char *path;
	const unsigned char *map;   /* its own, or the one a digests' check kept */
	size_t size;
	int n;
	struct st_tensor *t;
	int mapped_in;              /* the check's mapping: its pages mapped in whole */
	struct stat sb;
	struct copyhash *check;
	char want[FILEDIGEST_HEX];
};

static const struct { const char *name; size_t size; } dtypes[] = {
	[ST_BOOL] = {"BOOL", 1}, [ST_U8] = {"U8", 1}, [ST_I8] = {"I8", 1},
	[ST_F8_E5M2] = {"F8_E5M2", 1}, [ST_F8_E4M3] = {"F8_E4M3", 1},
	[ST_I16] = {"I16", 2}, [ST_U16] = {"U16", 2}, [ST_F16] = {"F16", 2}, [ST_BF16] = {"BF16", 2},
	[ST_I32] = {"I32", 4}, [ST_U32] = {"U32", 4}, [ST_F32] = {"F32", 4},
	[ST_I64] = {"I64", 8}, [ST_U64] = {"U64", 8}, [ST_F64] = {"F64", 8},
};
enum { NDTYPES = sizeof dtypes / sizeof dtypes[0] };

const char *st_dtype_name(int dtype)
{
	return dtype >= 0 && dtype < NDTYPES ? dtypes[dtype].name : "?";
}

static _Noreturn void corrupt(const char *path, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static _Noreturn void corrupt(const char *path, const char *fmt, ...)
{
	char why[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	die("%s: corrupt safetensors header: %s", path, why);
}

static int parse_dtype(const char *path, const char *name, json_t *v)
{
	const char *s = json_string_value(v);
	if (!s)
		corrupt(path, "tensor %s has no dtype", name);
	for (int d = 0; d < NDTYPES; d++)
		if (!strcmp(s, dtypes[d].name))
			return d;
	corrupt(path, "tensor %s has unknown dtype %s", name, s);
}

/* Sets t->ndim and t->shape; returns the element count, or -1 past SIZE_MAX. */
static int64_t parse_shape(const char *path, struct st_tensor *t, json_t *v)
{
	if (!json_is_array(v) || json_array_size(v) > ST_MAX_DIMS)
		corrupt(path, "tensor %s: shape is not an array of at most %d sizes", t->name, ST_MAX_DIMS);
	t->ndim = (int)json_array_size(v);
	int64_t numel = 1;
	for (int i = 0; i < t->ndim; i++) {
		json_t *d = json_array_get(v, (size_t)i);
		if (!json_is_integer(d) || json_integer_value(d) < 0)
			corrupt(path, "tensor %s: shape holds a non-size", t->name);
		t->shape[i] = json_integer_value(d);
		if (numel >= 0 && t->shape[i] && numel > INT64_MAX / t->shape[i])
			numel = -1;
		else if (numel >= 0)
			numel *= t->shape[i];
	}
	return numel;
}

/* Fills t from one header entry; *begin is its offset in the data area. */
static void parse_entry(const char *path, struct st_tensor *t, json_t *v,
			size_t datasize, size_t *begin)
{
	if (!json_is_object(v))
		corrupt(path, "tensor %s is not an object", t->name);
	t->dtype = parse_dtype(path, t->name, json_object_get(v, "dtype"));
	int64_t numel = parse_shape(path, t, json_object_get(v, "shape"));
	json_t *off = json_object_get(v, "data_offsets");
	json_t *b = json_array_get(off, 0), *e = json_array_get(off, 1);
	if (json_array_size(off) != 2 || !json_is_integer(b) || !json_is_integer(e))
		corrupt(path, "tensor %s: data_offsets is not [begin, end]", t->name);
	json_int_t bv = json_integer_value(b), ev = json_integer_value(e);
	if (bv < 0 || ev < bv || (uint64_t)ev > datasize)
		corrupt(path, "tensor %s: data_offsets [%lld, %lld] out of range (data is %zu bytes)",
			t->name, (long long)bv, (long long)ev, datasize);
	size_t esize = dtypes[t->dtype].size;
	t->nbytes = (size_t)(ev - bv);
	if (numel < 0 || (uint64_t)numel > SIZE_MAX / esize)
		corrupt(path, "tensor %s: its shape holds more values than a file can", t->name);
	if ((size_t)numel * esize != t->nbytes)
		corrupt(path, "tensor %s: %zu bytes for %lld values of %s", t->name,
			t->nbytes, (long long)numel, dtypes[t->dtype].name);
	*begin = (size_t)bv;
}

static const size_t *sort_key;
static int by_offset(const void *a, const void *b)
{
	size_t x = sort_key[*(const int *)a], y = sort_key[*(const int *)b];
	return (x > y) - (x < y);
}

/* An empty tensor holds no bytes, so it overlaps nothing, wherever its
 * offsets point (Python's writer gives it [k, k] at the next one's start). */
static void check_overlaps(const char *path, const struct st_tensor *t, const size_t *begin, int n)
{
	int *order = xmalloc((size_t)n * sizeof *order);
	for (int i = 0; i < n; i++)
		order[i] = i;
	sort_key = begin;
	qsort(order, (size_t)n, sizeof *order, by_offset);
	for (int i = 0, p = -1; i < n; i++) {
		int q = order[i];
		if (!t[q].nbytes)
			continue;
		if (p >= 0 && begin[q] < begin[p] + t[p].nbytes)
			corrupt(path, "tensors %s and %s overlap", t[p].name, t[q].name);
		p = q;
	}
	free(order);
}

static void parse_header(struct st_file *f, const char *text, size_t len, const unsigned char *data,
			 size_t datasize)
{
	json_error_t jerr;
	json_t *h = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!h)
		corrupt(f->path, "not JSON: %s at byte %d", jerr.text, jerr.position);
	if (!json_is_object(h))
		corrupt(f->path, "not a JSON object");
	f->t = xcalloc(json_object_size(h) + 1, sizeof *f->t);
	size_t *begin = xcalloc(json_object_size(h) + 1, sizeof *begin);
	const char *key;
	json_t *v;
	json_object_foreach(h, key, v) {
		if (!strcmp(key, "__metadata__"))
			continue;
		struct st_tensor *t = &f->t[f->n];
		t->name = xstrdup(key);
		t->file = f->path;
		t->of = f;
		parse_entry(f->path, t, v, datasize, &begin[f->n]);
		t->data = data + begin[f->n];
		f->n++;
	}
	check_overlaps(f->path, f->t, begin, f->n);
	free(begin);
	json_decref(h);
}

struct st_file *st_open(const char *path)
{
	off_t bytes;
	int fd = open_regular(path, &bytes);
	size_t size = (size_t)bytes;
	if (size < 8)
		corrupt(path, "file is %zu bytes, shorter than the 8-byte header length", size);
	struct st_file *f = xcalloc(1, sizeof *f);
	if (fstat(fd, &f->sb))
		die("cannot stat %s:", path);
	void *map = filedigest_take(&f->sb, f->want);
	f->mapped_in = map && !*f->want;
	if (!map && (map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED)
		die("cannot map %s:", path);
	close(fd);
	f->path = xstrdup(path);
	f->map = map;
	f->size = size;
	if (*f->want) {
		f->check = xmalloc(sizeof *f->check);
		copyhash_init(f->check, size);
	}
	uint64_t hlen;
	memcpy(&hlen, f->map, 8);
	if (f->check && hlen > DIGESTS_HEAD - 8 && !st_checked(f))   /* a header beyond the head checked */
		die("%s differs from what was written (its digest does not match)", path);
	if (hlen > size - 8)
		corrupt(path, "header length %llu is beyond the end of the file (%zu bytes)",
			(unsigned long long)hlen, size);
	parse_header(f, (const char *)f->map + 8, (size_t)hlen, f->map + 8 + hlen, size - 8 - hlen);
	return f;
}

int st_checked(struct st_file *f)
{
	if (!f->check)
		return 1;
	char hex[FILEDIGEST_HEX];
	copyhash_take(f->check, NULL, f->map + f->check->pos, f->size - f->check->pos);
	copyhash_hex(f->check, hex);
	free(f->check);
	f->check = NULL;
	int intact = !strcmp(hex, f->want);
	filedigest_verdict(&f->sb, intact);
	return intact;
}

void st_close(struct st_file *f)
{
	if (!f)
		return;
	st_checked(f);
	for (int i = 0; i < f->n; i++)
		free((char *)f->t[i].name);
	free(f->t);
	munmap((void *)f->map, f->size);
	free(f->path);
	free(f);
}

int st_count(const struct st_file *f)
{
	return f->n;
}

const struct st_tensor *st_get(const struct st_file *f, int i)
{
	return i >= 0 && i < f->n ? &f->t[i] : NULL;
}

const struct st_tensor *st_find(const struct st_file *f, const char *name)
{
	for (int i = 0; i < f->n; i++)
		if (!strcmp(f->t[i].name, name))
			return &f->t[i];
	return NULL;
}

static float f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
	uint32_t bits;
	if (exp == 0) {                       /* zero or subnormal: man * 2^-24 is exact */
		float v = ldexpf((float)man, -24);
		return sign ? -v : v;
	}
	if (exp == 0x1f)
		bits = sign | 0x7f800000u | (man << 13);
	else
		bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
	float v;
	memcpy(&v, &bits, 4);
	return v;
}

static float bf16_to_f32(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float v;
	memcpy(&v, &bits, 4);
	return v;
}

/* Maps in the pages of the n bytes at p in one call, not a fault each: a
 * large tensor loads up to twice as fast so (in a VM, each fault is a trap).
 * Kernels before 5.14 refuse it, and the faults come as before. */
static void map_in(const void *p, size_t n)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p & ~(page - 1);
	madvise((void *)a, (uintptr_t)p + n - a, MADV_POPULATE_READ);
}

void st_to_f32(const struct st_tensor *t, float *dst)
{
	const unsigned char *p = t->data;
	size_t n = t->nbytes / dtypes[t->dtype].size;
	if (t->nbytes && !t->of->mapped_in)
		map_in(p, t->nbytes);
	struct copyhash *h = t->of->check;
	size_t at = (size_t)(p - t->of->map);
	if (h && at >= h->pos) {
		copyhash_take(h, NULL, t->of->map + h->pos, at - h->pos);   /* what lies before it, unread */
		copyhash_take(h, t->dtype == ST_F32 ? dst : NULL, p, t->nbytes);
		if (t->dtype == ST_F32)
			return;
	}
	switch (t->dtype) {
	case ST_F32:
		memcpy(dst, p, t->nbytes);
		return;
	case ST_F64:
		for (size_t i = 0; i < n; i++) {
			double d;
			memcpy(&d, p + 8 * i, 8);
			dst[i] = (float)d;
		}
		return;
	case ST_F16:
	case ST_BF16:
		for (size_t i = 0; i < n; i++) {
			uint16_t h;
			memcpy(&h, p + 2 * i, 2);
			dst[i] = t->dtype == ST_F16 ? f16_to_f32(h) : bf16_to_f32(h);
		}
		return;
	default:
		die("%s: tensor %s has dtype %s, not F32, F16, BF16 or F64", t->file, t->name, dtypes[t->dtype].name);
	}
}

static json_t *header_entry(const struct tensor_ref *t, size_t begin)
{
	json_t *shape = json_array();
	for (int d = 0; d < t->ndim; d++)
		json_array_append_new(shape, json_integer(t->shape[d]));
	size_t end = begin + (size_t)tensor_numel(t) * sizeof(float);
	return json_pack("{s:s, s:o, s:[I,I]}", "dtype", "F32", "shape", shape,
			 "data_offsets", (json_int_t)begin, (json_int_t)end);
}

/* The JSON header, padded with spaces to a multiple of 8 bytes; sets *len. */
static char *header_text(const char *path, const struct tensor_ref *t, int n, size_t *len)
{
	json_t *h = json_object();
	json_object_set_new(h, "__metadata__", json_pack("{s:s}", "format", "pt"));
	size_t offset = 0;
	for (int i = 0; i < n; i++) {
		if (json_object_get(h, t[i].name))
			die("%s: tensor %s given twice", path, t[i].name);
		json_object_set_new(h, t[i].name, header_entry(&t[i], offset));
		offset += (size_t)tensor_numel(&t[i]) * sizeof(float);
	}
	char *text = json_dumps(h, JSON_COMPACT);
	json_decref(h);
	if (!text)
		die("%s: cannot encode the safetensors header", path);
	size_t n0 = strlen(text), padded = (n0 + 7) / 8 * 8;
	text = xrealloc(text, padded + 1);
	memset(text + n0, ' ', padded - n0);
	text[padded] = 0;
	*len = padded;
	return text;
}

void st_write(const char *path, const struct tensor_ref *t, int n)
{
	size_t len;
	char *header = header_text(path, t, n, &len);
	uint64_t hlen = len;
	struct afile *af = afile_open(path);
	afile_digest(af);   /* a model dir's digests take it so */
	afile_write(af, &hlen, 8);
	afile_write(af, header, len);
	for (int i = 0; i < n; i++)
		afile_write(af, t[i].data, (size_t)tensor_numel(&t[i]) * sizeof(float));
	afile_commit(af);
	free(header);
}
