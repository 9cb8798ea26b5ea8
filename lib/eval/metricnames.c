#include "eval/metricnames.h"
#include <string.h>

static int among(const char *name, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(name, *list))
			return 1;
	return 0;
}

int metric_known(const char *name, enum bert_task task)
{
	static const char *const cls[] = {"accuracy", "macro-f1", NULL};
	static const char *const multi[] = {"micro-f1", "macro-f1", "exact-match", NULL};
	static const char *const reg[] = {"pearson", "spearman", NULL};
	static const char *const tokcls[] = {"entity-f1", "accuracy", NULL};
	static const char *const *by_task[] = {cls, NULL, reg, multi, tokcls};
	if (!strcmp(name, "loss") || (!strcmp(name, "ppl") && task != TASK_REG))   /* e to a cross-entropy */
		return 1;
	return by_task[task] && among(name, by_task[task]);
}

int metric_higher_is_better(const char *name)
{
	return strcmp(name, "loss") && strcmp(name, "ppl");
}

const char *metric_default(enum bert_task task)
{
	static const char *names[] = {"accuracy", "loss", "loss", "micro-f1", "entity-f1"};
	return names[task];
}

const char *const *metric_path(const char *name)
{
	static const struct {
		const char *name, *path[4];
	} paths[] = {
		{"accuracy", {"accuracy"}}, {"macro-f1", {"macro", "f1"}}, {"mcc", {"mcc"}},
		{"micro-f1", {"micro", "f1"}}, {"exact-match", {"exact_match"}}, {"pearson", {"pearson"}},
		{"spearman", {"spearman"}}, {"entity-f1", {"entities", "micro", "f1"}}, {"loss", {"loss"}},
		{"ppl", {"ppl"}},
	};
	for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
		if (!strcmp(name, paths[i].name))
			return paths[i].path;
	return NULL;
}

enum bert_task eval_json_task(const json_t *j)
{
	return json_object_get(j, "entities")      ? TASK_TOKCLS
	       : json_object_get(j, "exact_match") ? TASK_MULTI
	       : json_object_get(j, "pearson")     ? TASK_REG
	       : json_object_get(j, "accuracy")    ? TASK_CLS
						   : TASK_MLM;
}
