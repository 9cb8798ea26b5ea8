/* Benchmark driver for tests/bench/tokenize and tokenize_json: the tokenizer's
 * core over the lines of a file with N threads, ids written in line order:
 * wp_encode (one wp_tokenizer a thread) for a vocab.txt, hftok_encode (one
 * hftok_space a thread, no special tokens) for a file named *.json.
 * usage: tokenize-driver VOCAB|TOKENIZER.JSON TEXT THREADS REPEAT [IDS-OUT]
 * Prints "MB/s seconds peak-RSS-MiB MB-per-CPU-second": wall-clock figures for the
 * median of REPEAT timed passes, CPU time over all of them. */
#include "data/hftok.h"
#include "data/wordpiece.h"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

struct line { const char *s; size_t len; struct ids ids; };

static double cpu_seconds(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		die("%s:", path);
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	rewind(f);
	char *s = xmalloc(*len + 1);
	if (fread(s, 1, *len, f) != *len)
		die("%s: short read", path);
	fclose(f);
	return s;
}

static struct line *split_lines(char *text, size_t len, size_t *n)
{
	size_t cap = 0;
	struct line *lines = NULL;
	*n = 0;
	for (char *p = text, *end = text + len; p < end;) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *eol = nl ? nl : end;
		grow(&lines, &cap, *n + 1, sizeof *lines);
		lines[(*n)++] = (struct line){ p, (size_t)(eol - p), { 0 } };
		p = eol + 1;
	}
	return lines;
}

/* One of the two, the other NULL. */
struct tokenizer { const struct vocab *v; const struct hftok *hf; };

static double encode_all(struct tokenizer tok, struct line *lines, size_t n, int threads)
{
	double t0 = omp_get_wtime();
	#pragma omp parallel num_threads(threads)
	{
		struct wp_tokenizer *t = tok.v ? wp_new(tok.v, 0) : NULL;
		struct hftok_space *s = tok.hf ? hftok_space_new() : NULL;
		#pragma omp for schedule(dynamic, 16)
		for (size_t i = 0; i < n; i++) {
			lines[i].ids.n = 0;
			if (t)
				wp_encode(t, lines[i].s, lines[i].len, &lines[i].ids);
			else
				hftok_encode(tok.hf, s, lines[i].s, lines[i].len, &lines[i].ids);
		}
		wp_free(t);
		hftok_space_free(s);
	}
	return omp_get_wtime() - t0;
}

static void write_ids(const char *path, const struct line *lines, size_t n)
{
	FILE *f = fopen(path, "w");
	if (!f)
		die("%s:", path);
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < lines[i].ids.n; k++)
			fprintf(f, k ? " %d" : "%d", lines[i].ids.v[k]);
		fputc('\n', f);
	}
	if (fclose(f))
		die("%s:", path);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The median of v[0..n-1], n > 0; sorts v. */
static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	if (argc < 5)
		die_usage("usage: tokenize-driver VOCAB|TOKENIZER.JSON TEXT THREADS REPEAT [IDS-OUT]");
	size_t namelen = strlen(argv[1]);
	int json = namelen >= 5 && !strcmp(argv[1] + namelen - 5, ".json");
	struct vocab *v = json ? NULL : vocab_load(argv[1]);
	struct hftok *hf = json ? hftok_load(argv[1]) : NULL;
	size_t len, n;
	char *text = slurp(argv[2], &len);
	struct line *lines = split_lines(text, len, &n);
	int threads = atoi(argv[3]), repeat = atoi(argv[4]);
	double *dt = xmalloc(sizeof *dt * (size_t)repeat), cpu = cpu_seconds();
	for (int r = 0; r < repeat; r++)
		dt[r] = encode_all((struct tokenizer){v, hf}, lines, n, threads);
	cpu = cpu_seconds() - cpu;
	double mid = median(dt, repeat);
	free(dt);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("%.1f %.3f %.1f %.1f\n", (double)len / mid / 1e6, mid, ru.ru_maxrss / 1024.0,
	       (double)len * repeat / cpu / 1e6);
	if (argc > 5)
		write_ids(argv[5], lines, n);
	for (size_t i = 0; i < n; i++)
		free(lines[i].ids.v);
	free(lines);
	free(text);
	vocab_free(v);
	hftok_free(hf);
	return 0;
}
