/* Classification metrics against scikit-learn (labels=range(k),
 * zero_division=0): random, binary, a class never predicted, a class absent
 * from the truth or from both, perfect, all wrong, one class predicted.
 * Plus the JSON shape and a golden report.
 * usage: test_metrics [FIXTURE_DIR]   (default tests/fixtures/metrics, made by
 * tests/fixtures/gen-metrics.py) */
#include "check.h"
#include "eval/metrics.h"
#include "expect_die.h"
#include "util/err.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *fixdir = "tests/fixtures/metrics";

static int near(double got, double want)
{
	return close_enough(got, want, 1e-9, 1e-9);
}

static struct confusion *confusion_of(json_t *c)
{
	json_t *truth = json_object_get(c, "truth"), *pred = json_object_get(c, "pred");
	struct confusion *cm = confusion_new(json_integer_value(json_object_get(c, "k")));
	for (size_t i = 0; i < json_array_size(truth); i++)
		confusion_add(cm, json_integer_value(json_array_get(truth, i)),
			      json_integer_value(json_array_get(pred, i)));
	return cm;
}

static double at(json_t *c, const char *key, int i)
{
	return json_number_value(json_array_get(json_object_get(c, key), i));
}

/* The first metric that differs from sklearn's, or NULL. */
static const char *first_mismatch(const struct cls_metrics *m, const struct confusion *cm, json_t *c)
{
	json_t *rows = json_object_get(c, "confusion");
	for (int t = 0; t < cm->k; t++)
		for (int p = 0; p < cm->k; p++)
			if (cm->m[t * cm->k + p] != json_integer_value(json_array_get(json_array_get(rows, t), p)))
				return "confusion";
	if (!near(m->accuracy, json_number_value(json_object_get(c, "accuracy"))))
		return "accuracy";
	if (!near(m->mcc, json_number_value(json_object_get(c, "mcc"))))
		return "mcc";
	for (int i = 0; i < m->k; i++) {
		const struct prf *s = &m->per_class[i];
		if (!near(s->precision, at(c, "precision", i)) || !near(s->recall, at(c, "recall", i)) ||
		    !near(s->f1, at(c, "f1", i)) || m->support[i] != at(c, "support", i))
			return "per class";
	}
	const char *avgs[] = {"macro", "micro", "weighted"};
	const struct prf *mine[] = {&m->macro, &m->micro, &m->weighted};
	for (int a = 0; a < 3; a++)
		if (!near(mine[a]->precision, at(c, avgs[a], 0)) || !near(mine[a]->recall, at(c, avgs[a], 1)) ||
		    !near(mine[a]->f1, at(c, avgs[a], 2)))
			return avgs[a];
	return NULL;
}

static void test_case(json_t *c)
{
	const char *name = json_string_value(json_object_get(c, "name"));
	struct confusion *cm = confusion_of(c);
	struct cls_metrics *m = metrics_compute(cm);
	const char *bad = first_mismatch(m, cm, c);
	CHECK(!bad, "%s: k=%d n=%lld: accuracy %.4f, mcc %.4f, macro f1 %.4f as sklearn within 1e-9%s%s",
	      name, m->k, (long long)m->total, m->accuracy, m->mcc, m->macro.f1,
	      bad ? "; differs: " : "", bad ? bad : "");
	metrics_free(m);
	confusion_free(cm);
}

static double jnum(json_t *j, const char *path0, const char *path1)
{
	return json_number_value(json_object_get(json_object_get(j, path0), path1));
}

/* Without names the classes are "0".."k-1"; the values are the struct's. */
static void test_json(json_t *c)
{
	struct confusion *cm = confusion_of(c);
	struct cls_metrics *m = metrics_compute(cm);
	json_t *j = metrics_json(m, cm, NULL);
	json_t *cls3 = json_object_get(json_object_get(j, "classes"), "3");
	json_t *conf = json_object_get(j, "confusion");
	int ok = json_number_value(json_object_get(j, "accuracy")) == m->accuracy &&
		 json_number_value(json_object_get(j, "mcc")) == m->mcc &&
		 json_integer_value(json_object_get(j, "support")) == m->total &&
		 jnum(j, "macro", "f1") == m->macro.f1 && jnum(j, "micro", "recall") == m->micro.recall &&
		 jnum(j, "weighted", "precision") == m->weighted.precision &&
		 json_number_value(json_object_get(cls3, "recall")) == m->per_class[3].recall &&
		 json_integer_value(json_object_get(cls3, "support")) == m->support[3] &&
		 json_object_size(json_object_get(j, "classes")) == (size_t)m->k &&
		 !strcmp(json_string_value(json_array_get(json_object_get(j, "labels"), 4)), "4") &&
		 json_array_size(conf) == (size_t)m->k &&
		 json_integer_value(json_array_get(json_array_get(conf, 2), 3)) == cm->m[2 * m->k + 3];
	char *text = json_dumps(j, JSON_COMPACT);
	CHECK(ok, "json of %s carries every metric: %.120s...", json_string_value(json_object_get(c, "name")), text);
	free(text);
	json_decref(j);
	metrics_free(m);
	confusion_free(cm);
}

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		die("cannot open %s:", path);
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	for (int ch; (ch = fgetc(f)) != EOF;)
		fputc(ch, mem);
	fclose(f);
	fclose(mem);
	return buf;
}

static void test_report(json_t *c)
{
	char *names[] = {"négatif", "neutral", "very-positive-review"};
	char path[512], *got = NULL;
	size_t len = 0;
	snprintf(path, sizeof path, "%s/report.txt", fixdir);
	struct confusion *cm = confusion_of(c);
	struct cls_metrics *m = metrics_compute(cm);
	FILE *mem = open_memstream(&got, &len);
	metrics_report(mem, m, cm, names);
	fclose(mem);
	char *want = read_text(path);
	CHECK(!strcmp(got, want), "report equals %s (sklearn's classification_report + mcc + confusion)", path);
	if (strcmp(got, want))
		printf("    got:\n%s    want:\n%s", got, want);
	free(want);
	free(got);
	metrics_free(m);
	confusion_free(cm);
}

static void add_out_of_range(const void *arg)
{
	(void)arg;
	struct confusion *c = confusion_new(3);
	confusion_add(c, 1, 3);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		fixdir = argv[1];
	char path[512];
	json_error_t err;
	snprintf(path, sizeof path, "%s/cases.json", fixdir);
	json_t *cases = json_load_file(path, 0, &err), *c, *report = NULL;
	if (!cases)
		die("%s:%d: %s", path, err.line, err.text);
	size_t i;
	json_array_foreach(cases, i, c) {
		test_case(c);
		if (!strcmp(json_string_value(json_object_get(c, "name")), "report"))
			report = c;
	}
	test_json(json_array_get(cases, 0));
	if (report)
		test_report(report);
	CHECK(json_array_size(cases) >= 9 && report, "the fixture has its %zu cases, the report among them",
	      json_array_size(cases));
	expect_die("class outside 0..k-1", add_out_of_range, NULL, "class 1 or 3 outside 0..2");
	json_decref(cases);
	CHECK_DONE();
}
