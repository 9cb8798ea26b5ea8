/* Optimizers over parameters kept in one flat fp32 buffer of a backend, with
 * a gradient buffer of the same layout. The updates equal PyTorch 1.13's
 * torch.optim AdamW, Adam and SGD, and NVIDIA apex's FusedLAMB, element for
 * element. */
#ifndef TS_OPTIM_H
#define TS_OPTIM_H
#include "backend/backend.h"
#include "format/tensor.h"
#include <stddef.h>

enum optim_kind { OPTIM_ADAMW, OPTIM_ADAM, OPTIM_SGD, OPTIM_LAMB };

struct optim_config {
	enum optim_kind kind;
	double weight_decay;        /* only on tensors whose decays[] flag is set */
	double momentum;            /* SGD; 0 keeps no buffer */
	double beta1, beta2, eps;   /* AdamW, Adam, LAMB */
	double ema;                 /* > 0: keep an exponential moving average of the
				     * parameters with this decay an update */
};

/* "adamw", "adam", "sgd" or "lamb" as an enum optim_kind; -1 for anything else. */
int optim_kind_parse(const char *name);
const char *optim_kind_name(enum optim_kind kind);

/* An optimizer on backend be for the n tensors params[]: tensor i's values
 * lie at params_dev + (params[i].data - layout_base) in the backend's memory,
 * its gradient at the same offset of grads_dev. decays[t] says whether
 * tensor t gets weight decay (not biases, LayerNorm). Keeps the pointers and
 * copies of the names; the moments live in the backend's memory. */
struct optim *optim_new(const struct optim_config *c, const struct backend *be,
			const struct tensor_ref *params, const unsigned char *decays, int n,
			const float *layout_base, float *params_dev, const float *grads_dev);
void optim_free(struct optim *o);

/* ZeRO-1: the optimizer updates, and keeps moments for, only the elements
 * [lo, hi) of the layout (a shard of the parameter buffer); the other
 * processes' optimizers own the rest. gather(ctx, x, n) sums x[0..n) over
 * all of them, for optim_pull. Call it before the first step; dies for LAMB,
 * whose trust ratio needs whole tensors, and with a moving average, which
 * needs the whole parameters. */
void optim_own(struct optim *o, size_t lo, size_t hi, void (*gather)(const void *ctx, float *x, size_t n),
	       const void *ctx);

/* Learning rates by tensor: tensor i's is scale[i] times the step's; 0
 * freezes it (no update, no weight decay, no moments). Default 1. */
void optim_set_lr_scale(struct optim *o, const double *scale);

/* One update of every tensor from the current gradients times gscale (fp16's
 * unscaling, --clip's; the gradients stay as they are) with learning rate
 * lr: the same bits as scaling the gradients first, in one pass less. Counts
 * the step first, as PyTorch does, so bias correction sees 1, 2, ... */
void optim_step(struct optim *o, double lr, float gscale);
long optim_steps(const struct optim *o);
void optim_set_steps(struct optim *o, long steps);

/* Swaps the parameters and their moving average (c->ema), for an
 * evaluation of the average; a second call swaps them back. */
void optim_swap_ema(struct optim *o);

/* The moment buffers as named tensors for checkpoints: "exp_avg.<param>" and
 * "exp_avg_sq.<param>" (Adam family, LAMB) or "momentum_buffer.<param>" (SGD),
 * and "ema.<param>", the moving average.
 * Fills out[] (when not NULL) with views into a host copy of them, which
 * optim_pull brings up to date and optim_push gives back to the backend (on
 * the CPU the views are the moments themselves); returns their number.
 * Together with optim_set_steps, a resumed run continues bit for bit.
 * Owning a shard, the optimizer keeps the host copy only from optim_state
 * to optim_unstage, and optim_pull, which every process then calls, fills
 * in the other shards with gather. */
int optim_state(struct optim *o, struct tensor_ref *out);
void optim_pull(struct optim *o);
void optim_push(struct optim *o);
void optim_unstage(struct optim *o);
#endif
