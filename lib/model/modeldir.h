/* Hugging Face model dirs: config.json + model.safetensors + vocab.txt, read
 * into and written from a struct bert under HF tensor names. */
#ifndef TS_MODELDIR_H
#define TS_MODELDIR_H
#include "model/bert.h"
#include <stdint.h>

/* Dies in one line, naming option (the one that gave DIR), where DIR is no
 * dir, has no config.json (a run dir or a data dir named as one), or its
 * files differ from the digests it was saved with (format/dirdigest.h); a
 * dir without them (one transformers saved) passes. A program verifies each model dir it is given once, before it
 * reads a byte of it; the weights read for the check are kept for
 * modeldir_load, which comes next. */
void modeldir_verify(const char *option, const char *dir);
/* Loads DIR as a model for task on backend be, of the family its
 * config.json names (family.h). Tensor names are the family's, matched with
 * or without its prefix ("bert.": sentence-transformers saves without),
 * with LayerNorm gamma/beta as weight/bias, and the MLM decoder's bias as
 * its head's; tensors the model does not use are ignored. A missing
 * head (pooler and classifier for cls, cls.predictions.* for mlm) gets
 * bert_init's values for *head_seed, with one line on stderr, and is an
 * error when head_seed is NULL (a model to evaluate or learn from); a missing
 * encoder or embedding tensor, or one of another shape, is an error naming
 * it. num_labels 0 takes the config's; another count than the config's gives
 * a new classifier (said on stderr; an error without head_seed) and no label
 * names. If labels is not NULL, *labels and *nlabels get the config's label
 * names (see hfconfig_read). */
struct bert *modeldir_load(const char *dir, const struct backend *be, enum bert_task task,
			   int num_labels, const uint64_t *head_seed, char ***labels, int *nlabels);
/* The weights of model dir DIR into m, which has their shapes (those of
 * another checkpoint of its run), as modeldir_load reads them; its label
 * names as there. */
void modeldir_reload(struct bert *m, const char *dir, char ***labels, int *nlabels);

/* Puts the rows of m's classifier, whose classes are named have, in the
 * order of want where want names the same classes; returns 0 (and leaves
 * it) where it names others. */
int modeldir_reorder_classes(struct bert *m, char *const *have, int nhave, char *const *want, int nwant);
/* Makes the classifier of m, loaded from dir whose classes are named have,
 * one for the classes named want: its rows reordered when want names the
 * same classes in another order, a new one from seed (said on stderr) when
 * other classes; unchanged when the names agree or either side has none. */
void modeldir_order_classes(struct bert *m, const char *dir, char *const *have, int nhave, char *const *want,
			    int nwant, uint64_t seed);

/* Writes model.safetensors, config.json and a copy of vocab_path (none when
 * NULL) as DIR, with their digests, atomically as a whole: the files go to
 * DIR.tmp.PID, are fsynced, and that dir then takes DIR's place; an existing
 * DIR (whatever it holds: a run's best/ or final/, perhaps damaged) is
 * replaced only once the new one is complete. */
void modeldir_save(const char *dir, struct bert *m, char *const *labels, int nlabels,
		   const char *vocab_path);
/* Writes those files into dir, a temp dir that a larger atomic dir (a
 * checkpoint) is being made in. */
void modeldir_write(const char *dir, struct bert *m, char *const *labels, int nlabels,
		    const char *vocab_path);

/* The name transformers gives a file's tensor, named name in a checkpoint
 * of family: the family's prefix ("bert.") before the encoder's bare names,
 * LayerNorm gamma/beta as weight/bias, the MLM decoder's bias as its
 * head's ("cls.predictions.bias"). */
void modeldir_hf_name(enum family_id family, const char *name, char *out, size_t size);
/* The name a tensor of a model of config c, named name in the model
 * (bert_tensors: BERT's names), has in c's family's files. */
void modeldir_tensor_name(const struct bert_config *c, const char *name, char *out, size_t size);
#endif
