/* Classification metrics. The formulas are scikit-learn's, term for term:
 * F1 = 2tp/(true + predicted) rather than from rounded precision and recall,
 * MCC from the row and column sums of the confusion matrix. */
#include "eval/metrics.h"
#include "util/err.h"
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { REPORT_DIGITS = 4 };

struct confusion *confusion_new(int k)
{
	struct confusion *c = xmalloc(sizeof *c);
	c->k = k;
	c->m = xcalloc((size_t)k * k, sizeof *c->m);
	return c;
}

void confusion_add(struct confusion *c, int truth, int pred)
{
	if (truth < 0 || truth >= c->k || pred < 0 || pred >= c->k)
		die("confusion matrix: class %d or %d outside 0..%d", truth, pred, c->k - 1);
	c->m[(size_t)truth * c->k + pred]++;
}

void confusion_free(struct confusion *c)
{
	if (c)
		free(c->m);
	free(c);
}

/* sklearn's zero_division=0 */
static double ratio(double num, double den)
{
	return den != 0 ? num / den : 0;
}

/* sklearn's matthews_corrcoef: covariances from the class totals. */
static double mcc(const int64_t *truth_sum, const int64_t *pred_sum, int k, int64_t correct,
		  int64_t total)
{
	double n = total, tp = 0, pp = 0, tt = 0;
	for (int i = 0; i < k; i++) {
		tp += (double)truth_sum[i] * pred_sum[i];
		pp += (double)pred_sum[i] * pred_sum[i];
		tt += (double)truth_sum[i] * truth_sum[i];
	}
	double cov_tp = correct * n - tp, cov_pp = n * n - pp, cov_tt = n * n - tt;
	return cov_pp * cov_tt != 0 ? cov_tp / sqrt(cov_pp * cov_tt) : 0;
}

static struct prf prf_divide(struct prf a, double d)
{
	return (struct prf){ratio(a.precision, d), ratio(a.recall, d), ratio(a.f1, d)};
}

struct cls_metrics *metrics_compute(const struct confusion *c)
{
	int k = c->k;
	struct cls_metrics *m = xcalloc(1, sizeof *m);
	int64_t *predicted = xcalloc(k, sizeof *predicted), correct = 0;
	m->k = k;
	m->per_class = xcalloc(k, sizeof *m->per_class);
	m->support = xcalloc(k, sizeof *m->support);
	for (int t = 0; t < k; t++) {
		for (int p = 0; p < k; p++) {
			m->support[t] += c->m[(size_t)t * k + p];
			predicted[p] += c->m[(size_t)t * k + p];
		}
		correct += c->m[(size_t)t * k + t];
		m->total += m->support[t];
	}
	struct prf sum = {0}, wsum = {0};
	for (int i = 0; i < k; i++) {
		double tp = c->m[(size_t)i * k + i], support = m->support[i];
		struct prf *s = &m->per_class[i];
		*s = (struct prf){ratio(tp, predicted[i]), ratio(tp, support),
				  ratio(2 * tp, support + predicted[i])};
		sum = (struct prf){sum.precision + s->precision, sum.recall + s->recall, sum.f1 + s->f1};
		wsum = (struct prf){wsum.precision + support * s->precision,
				    wsum.recall + support * s->recall, wsum.f1 + support * s->f1};
	}
	m->accuracy = ratio(correct, m->total);
	m->micro = (struct prf){m->accuracy, m->accuracy, m->accuracy};
	m->macro = prf_divide(sum, k);
	m->weighted = prf_divide(wsum, m->total);
	m->mcc = mcc(m->support, predicted, k, correct, m->total);
	free(predicted);
	return m;
}

void metrics_free(struct cls_metrics *m)
{
	if (!m)
		return;
	free(m->per_class);
	free(m->support);
	free(m);
}

/* names[i], or the class number where there are no names. */
static const char *class_name(char *const *names, int i, char buf[16])
{
	if (names)
		return names[i];
	snprintf(buf, 16, "%d", i);
	return buf;
}

static json_t *prf_json(const struct prf *p)
{
	return json_pack("{s:f, s:f, s:f}", "precision", p->precision, "recall", p->recall, "f1", p->f1);
}

json_t *metrics_json(const struct cls_metrics *m, const struct confusion *c, char *const *names)
{
	json_t *classes = json_object(), *labels = json_array(), *rows = json_array();
	for (int i = 0; i < m->k; i++) {
		char buf[16];
		const char *name = class_name(names, i, buf);
		json_t *row = json_array();
		json_t *cls = json_pack("{s:f, s:f, s:f, s:I}", "precision", m->per_class[i].precision,
					"recall", m->per_class[i].recall, "f1", m->per_class[i].f1,
					"support", (json_int_t)m->support[i]);
		for (int p = 0; p < c->k; p++)
			json_array_append_new(row, json_integer(c->m[(size_t)i * c->k + p]));
		if (!cls || json_object_set_new(classes, name, cls) ||
		    json_array_append_new(labels, json_string(name)) || json_array_append_new(rows, row))
			die("metrics: cannot build the json for class %s", name);
	}
	json_t *j = json_pack("{s:f, s:f, s:I, s:o, s:o, s:o, s:o, s:o, s:o}",
			      "accuracy", m->accuracy, "mcc", m->mcc, "support", (json_int_t)m->total,
			      "macro", prf_json(&m->macro), "micro", prf_json(&m->micro),
			      "weighted", prf_json(&m->weighted), "classes", classes,
			      "labels", labels, "confusion", rows);
	if (!j)
		die("metrics: cannot build the json");
	return j;
}

/* s as the report shows it: its control characters escaped, which keeps a
 * row on its line; a name of any length whole. */
static char *shown_name(const char *s)
{
	size_t n = 4 * strlen(s) + 6;   /* a byte becomes at most \xNN */
	char *out = xmalloc(n);
	escape_controls(s, out, n);
	return out;
}

/* Columns count code points, as Python pads: labels may be UTF-8. */
static int text_width(const char *s)
{
	char *shown = shown_name(s);
	int n = 0;
	for (const char *p = shown; *p; p++)
		n += ((unsigned char)*p & 0xc0) != 0x80;
	free(shown);
	return n;
}

static void put_right(FILE *f, const char *s, int width)
{
	char *shown = shown_name(s);
	int w = text_width(s);
	fprintf(f, "%*s%s", width > w ? width - w : 0, "", shown);
	free(shown);
}

/* One line of the classification report; NULL p leaves precision and recall
 * blank, as sklearn's accuracy line does. */
static void report_line(FILE *f, int width, const char *head, const struct prf *p, double f1,
			int64_t support)
{
	put_right(f, head, width);
	if (p)
		fprintf(f, "  %9.*f %9.*f", REPORT_DIGITS, p->precision, REPORT_DIGITS, p->recall);
	else
		fprintf(f, "  %9s %9s", "", "");
	fprintf(f, " %9.*f %9" PRId64 "\n", REPORT_DIGITS, f1, support);
}

static void report_table(FILE *f, const struct cls_metrics *m, char *const *names, int width)
{
	fprintf(f, "%*s  %9s %9s %9s %9s\n\n", width, "", "precision", "recall", "f1-score", "support");
	for (int i = 0; i < m->k; i++) {
		char buf[16];
		report_line(f, width, class_name(names, i, buf), &m->per_class[i],
			    m->per_class[i].f1, m->support[i]);
	}
	fputc('\n', f);
	report_line(f, width, "accuracy", NULL, m->accuracy, m->total);
	report_line(f, width, "macro avg", &m->macro, m->macro.f1, m->total);
	report_line(f, width, "weighted avg", &m->weighted, m->weighted.f1, m->total);
	report_line(f, width, "mcc", NULL, m->mcc, m->total);
}

/* Each column as wide as its class name or its largest count. */
static void report_confusion(FILE *f, const struct confusion *c, char *const *names, int width)
{
	int *colw = xcalloc(c->k, sizeof *colw);
	char buf[32];
	for (int p = 0; p < c->k; p++) {
		colw[p] = text_width(class_name(names, p, buf));
		for (int t = 0; t < c->k; t++) {
			int digits = snprintf(buf, sizeof buf, "%" PRId64, c->m[(size_t)t * c->k + p]);
			colw[p] = digits > colw[p] ? digits : colw[p];
		}
	}
	fprintf(f, "\nconfusion matrix (rows: true class, columns: predicted class)\n%*s", width, "");
	for (int p = 0; p < c->k; p++) {
		fputs("  ", f);
		put_right(f, class_name(names, p, buf), colw[p]);
	}
	for (int t = 0; t < c->k; t++) {
		fputc('\n', f);
		put_right(f, class_name(names, t, buf), width);
		for (int p = 0; p < c->k; p++)
			fprintf(f, "  %*" PRId64, colw[p], c->m[(size_t)t * c->k + p]);
	}
	fputc('\n', f);
	free(colw);
}

void metrics_report(FILE *f, const struct cls_metrics *m, const struct confusion *c,
		    char *const *names)
{
	int width = text_width("weighted avg");
	for (int i = 0; i < m->k; i++) {
		char buf[16];
		int w = text_width(class_name(names, i, buf));
		width = w > width ? w : width;
	}
	report_table(f, m, names, width);
	report_confusion(f, c, names, width);
}

struct prf_table *prf_table_compute(const int64_t *tp, const int64_t *pred, const int64_t *truth, int k)
{
	struct prf_table *t = xcalloc(1, sizeof *t);
	t->k = k;
	t->per_class = xcalloc(k ? (size_t)k : 1, sizeof *t->per_class);
	t->support = xcalloc(k ? (size_t)k : 1, sizeof *t->support);
	double all_tp = 0, all_pred = 0;
	struct prf sum = {0}, wsum = {0};
	for (int i = 0; i < k; i++) {
		double y = truth[i];
		struct prf *s = &t->per_class[i];
		*s = (struct prf){ratio(tp[i], pred[i]), ratio(tp[i], y), ratio(2.0 * tp[i], y + pred[i])};
		t->support[i] = truth[i];
		t->total += truth[i];
		all_tp += tp[i], all_pred += pred[i];
		sum = (struct prf){sum.precision + s->precision, sum.recall + s->recall, sum.f1 + s->f1};
		wsum = (struct prf){wsum.precision + y * s->precision, wsum.recall + y * s->recall, wsum.f1 + y * s->f1};
	}
	t->micro = (struct prf){ratio(all_tp, all_pred), ratio(all_tp, t->total), ratio(2 * all_tp, t->total + all_pred)};
	t->macro = prf_divide(sum, k);
	t->weighted = prf_divide(wsum, t->total);
	return t;
}

void prf_table_free(struct prf_table *t)
{
	if (!t)
		return;
	free(t->per_class);
	free(t->support);
	free(t);
}

json_t *prf_table_json(const struct prf_table *t, char *const *names)
{
	json_t *classes = json_object();
	for (int i = 0; i < t->k; i++) {
		char buf[16];
		const char *name = class_name(names, i, buf);
		json_t *cls = json_pack("{s:f, s:f, s:f, s:I}", "precision", t->per_class[i].precision, "recall",
					t->per_class[i].recall, "f1", t->per_class[i].f1, "support",
					(json_int_t)t->support[i]);
		if (!cls || json_object_set_new(classes, name, cls))
			die("metrics: cannot build the json for class %s", name);
	}
	json_t *j = json_pack("{s:o, s:o, s:o, s:o}", "micro", prf_json(&t->micro), "macro", prf_json(&t->macro),
			      "weighted", prf_json(&t->weighted), "classes", classes);
	if (!j)
		die("metrics: cannot build the json");
	return j;
}

void prf_table_report(FILE *f, const struct prf_table *t, char *const *names)
{
	int width = text_width("weighted avg");
	char buf[16];
	for (int i = 0; i < t->k; i++) {
		int w = text_width(class_name(names, i, buf));
		width = w > width ? w : width;
	}
	fprintf(f, "%*s  %9s %9s %9s %9s\n\n", width, "", "precision", "recall", "f1-score", "support");
	for (int i = 0; i < t->k; i++)
		report_line(f, width, class_name(names, i, buf), &t->per_class[i], t->per_class[i].f1, t->support[i]);
	fputc('\n', f);
	report_line(f, width, "micro avg", &t->micro, t->micro.f1, t->total);
	report_line(f, width, "macro avg", &t->macro, t->macro.f1, t->total);
	report_line(f, width, "weighted avg", &t->weighted, t->weighted.f1, t->total);
}

double class_probability(float logit)
{
	return 1.0 / (1.0 + exp(-(double)logit));
}

int class_predicted(float logit, double threshold)
{
	return class_probability(logit) >= threshold;
}

int predicted_class(const float *logits, int k)
{
	int best = 0;
	for (int i = 1; i < k; i++)
		if (logits[i] > logits[best])
			best = i;
	return best;
}
