#include "model/family.h"
#include <stddef.h>
#include <string.h>

static const struct rename bert_names[] = { { NULL, NULL, 0 } };

/* RoBERTa's heads: the classification head (dense, tanh, out_proj, no
 * pooler) and lm_head; its encoder under "roberta." */
static const struct rename roberta_names[] = {
	{ "bert.pooler.dense.", "classifier.dense.", 1 },
	{ "classifier.", "classifier.out_proj.", 1 },
	{ "cls.predictions.transform.dense.", "lm_head.dense.", 0 },
	{ "cls.predictions.transform.LayerNorm.", "lm_head.layer_norm.", 0 },
	{ "cls.predictions.bias", "lm_head.bias", 0 },
	{ "bert.", "roberta.", 0 },
	{ NULL, NULL, 0 },
};

static const struct family families[FAMILY_COUNT] = {
	[FAMILY_BERT] = { "bert", "Bert", "bert.", 0, 0, 0, 2, 1e-12f, 512, bert_names },
	[FAMILY_ROBERTA] = { "roberta", "Roberta", "roberta.", 1, 1, 1, 1, 1e-5f, 514, roberta_names },
	[FAMILY_XLM_ROBERTA] = { "xlm-roberta", "XLMRoberta", "roberta.", 1, 1, 1, 1, 1e-5f, 514, roberta_names },
};

const struct family *family_of(enum family_id id)
{
	return &families[id];
}

int family_by_type(const char *type)
{
	for (int i = 0; i < FAMILY_COUNT; i++)
		if (!strcmp(families[i].model_type, type))
			return i;
	return -1;
}

const char *family_types(void)
{
	static char all[FAMILY_COUNT * 16];
	if (!all[0])
		for (int i = 0; i < FAMILY_COUNT; i++) {
			if (i)
				strcat(all, ", ");
			strcat(all, families[i].model_type);
		}
	return all;
}

int family_first_position(enum family_id id, int pad_id)
{
	return families[id].positions_after_pad ? pad_id + 1 : 0;
}
