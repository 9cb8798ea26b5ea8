/* The scores of regression, multi-label and token classification: Pearson
 * and Spearman against values worked by hand (as scipy.stats gives them),
 * per-class precision, recall and F1 with their means (sklearn's formulas),
 * and entities found in tags by seqeval's default rules. */
#include "check.h"
#include "eval/corr.h"
#include "eval/entities.h"
#include "util/err.h"
#include <stdlib.h>
#include <string.h>

static void test_corr(void)
{
	double x[] = {1, 2, 3, 4, 5}, y[] = {5, 6, 7, 8, 7}, flat[] = {2, 2, 2, 2, 2};
	/* r = 6/sqrt(10 * 5.2); the ranks of y are 1 2 3.5 5 3.5: rho = 8/sqrt(10 * 9.5) */
	CHECK(close_enough(pearson(x, y, 5), 6 / sqrt(52), 1e-12, 0), "pearson %.12f", pearson(x, y, 5));
	CHECK(close_enough(spearman(x, y, 5), 8 / sqrt(95), 1e-12, 0), "spearman with ties %.12f", spearman(x, y, 5));
	double rev[] = {9, 7, 4, 3, 1};
	CHECK(spearman(x, rev, 5) == -1 && close_enough(pearson(x, rev, 5), -20 / sqrt(408), 1e-12, 0),
	      "a falling series: rho -1, r %.7f", pearson(x, rev, 5));
	CHECK(isnan(pearson(x, flat, 5)) && isnan(spearman(flat, y, 5)) && isnan(pearson(x, y, 1)),
	      "a constant side or a single pair: NaN, as scipy");
	double hole[] = {1, NAN, 3, 4, 2};
	CHECK(isnan(spearman(hole, y, 5)) && isnan(spearman(x, hole, 5)) && isnan(pearson(hole, y, 5)),
	      "a NaN on either side (a diverged model's prediction): NaN, as scipy, not a rank among numbers");
}

static void test_prf_table(void)
{
	/* three classes: tp, predicted, true */
	int64_t tp[] = {2, 0, 1}, pred[] = {3, 1, 1}, truth[] = {4, 0, 2};
	struct prf_table *t = prf_table_compute(tp, pred, truth, 3);
	CHECK(close_enough(t->per_class[0].precision, 2.0 / 3, 1e-12, 0) && t->per_class[0].recall == 0.5 &&
		      close_enough(t->per_class[0].f1, 4.0 / 7, 1e-12, 0),
	      "per class: 2 of 3 predicted right, 2 of 4 found");
	CHECK(t->per_class[1].precision == 0 && t->per_class[1].recall == 0 && t->per_class[1].f1 == 0,
	      "a class predicted but never true scores 0 (zero_division=0)");
	CHECK(close_enough(t->micro.precision, 3.0 / 5, 1e-12, 0) && close_enough(t->micro.recall, 3.0 / 6, 1e-12, 0) &&
		      close_enough(t->micro.f1, 6.0 / 11, 1e-12, 0),
	      "micro from the summed counts");
	double f1_2 = 2.0 / 3;
	CHECK(close_enough(t->macro.f1, (4.0 / 7 + 0 + f1_2) / 3, 1e-12, 0) &&
		      close_enough(t->weighted.f1, (4 * 4.0 / 7 + 2 * f1_2) / 6, 1e-12, 0) && t->total == 6,
	      "macro the plain mean, weighted by support");
	prf_table_free(t);
}

/* Adds one sequence of tags by name. */
static void add(struct entities *e, char *const *names, int k, const char *truth, const char *pred)
{
	int32_t a[32], b[32];
	int n = 0, m = 0;
	char buf[256];
	for (int side = 0; side < 2; side++) {
		strcpy(buf, side ? pred : truth);
		for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
			int c = 0;
			while (c < k && strcmp(names[c], tok))
				c++;
			if (c == k)
				die("no tag %s", tok);
			side ? (b[m++] = c) : (a[n++] = c);
		}
	}
	if (n != m)
		die("sequences of %d and %d tags", n, m);
	entities_add(e, a, b, n);
}

/* The counts of type name: true, predicted, found. */
static int counts_are(const struct entities *e, const char *type, int64_t t, int64_t p, int64_t c)
{
	for (int i = 0; i < e->ntypes; i++)
		if (!strcmp(e->types[i], type))
			return e->truth[i] == t && e->pred[i] == p && e->correct[i] == c;
	return 0;
}

static void test_entities(void)
{
	char *names[] = {"O", "B-PER", "I-PER", "B-LOC", "I-LOC", "E-LOC", "S-PER", "B-ORG"};
	int k = 8;
	struct entities *e = entities_new(names, k);
	add(e, names, k, "B-PER I-PER O B-LOC", "B-PER I-PER O B-ORG");
	CHECK(counts_are(e, "PER", 1, 1, 1) && counts_are(e, "LOC", 1, 0, 0) && counts_are(e, "ORG", 0, 1, 0),
	      "a span found whole counts; a wrong type does not");
	entities_free(e);

	e = entities_new(names, k);
	add(e, names, k, "O I-PER I-PER O", "O B-PER O O");
	CHECK(counts_are(e, "PER", 1, 1, 0), "an I- after O starts an entity; a shorter span is not found");
	entities_free(e);

	e = entities_new(names, k);
	add(e, names, k, "B-PER I-LOC B-PER B-PER", "S-PER B-LOC E-LOC O");
	CHECK(counts_are(e, "PER", 3, 1, 1) && counts_are(e, "LOC", 1, 1, 0),
	      "a change of type ends an entity, B after B starts one; S- and E- close theirs");
	entities_free(e);

	e = entities_new(names, k);
	add(e, names, k, "B-LOC I-LOC", "B-LOC I-LOC");
	add(e, names, k, "I-LOC", "B-LOC");
	char **types;
	struct prf_table *t = entities_table(e, &types);
	CHECK(t->k == 1 && !strcmp(types[0], "LOC") && t->micro.f1 == 1 && t->support[0] == 2,
	      "sequences apart, and only types that occur: LOC found twice of 2");
	prf_table_free(t);
	free(types);
	entities_free(e);
}

int main(void)
{
	test_corr();
	test_prf_table();
	test_entities();
	CHECK_DONE();
}
