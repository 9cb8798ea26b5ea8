/* A batch as the model takes it: checked, its sequences' rows packed one
 * after another up to each one's last real token or predicted position,
 * the rows the head predicts listed, and all of it where the ops read it,
 * in buffers of the backend that grow to fit. */
#include "model/bert_inside.h"
#include "backend/plans.h"
#include "util/err.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void *bert_fit(const struct backend *be, struct on_backend *b, size_t bytes)
{
	if (bytes > b->cap || !b->p) {
		/* host memory is taken as it is first touched: room to spare costs
		 * nothing, and a buffer that grows with each larger batch is made
		 * afresh (and its pages zeroed) a few times, not at each */
		size_t want = be->host && bytes < 2 * b->cap ? 2 * b->cap : bytes;
		if (b->p)
			be->release(b->p);
		b->p = be->alloc(want);
		b->cap = want;
	}
	return b->p;
}

static void check_batch(const struct bert *m, const struct bert_batch *b)
{
	const struct bert_config *c = &m->c;
	if (b->B < 1 || b->T < 1)
		die("bert: empty batch (B %d, T %d)", b->B, b->T);
	if (b->T > bert_positions(c))
		die("bert: sequence length %d exceeds max positions %d", b->T, bert_positions(c));
	for (int i = 0; i < b->B * b->T; i++) {
		if (b->ids[i] < 0 || b->ids[i] >= c->vocab)
			die("bert: token id %d out of range [0, %d)", b->ids[i], c->vocab);
		if (b->types && c->type_vocab && (b->types[i] < 0 || b->types[i] >= c->type_vocab))
			die("bert: token type %d out of range [0, %d)", b->types[i],
			    c->type_vocab);
	}
	if (c->task == TASK_REG || c->task == TASK_MULTI) {
		int n = b->B * (c->task == TASK_MULTI ? c->num_labels : 1);
		for (int i = 0; i < n; i++)
			if (!(c->task == TASK_REG ? isfinite(b->targets[i])
						  : b->targets[i] >= 0 && b->targets[i] <= 1))
				die("bert: target %g is not %s", (double)b->targets[i],
				    c->task == TASK_REG ? "finite" : "in [0, 1]");
		return;
	}
	int nlabels = c->task == TASK_CLS ? b->B : b->B * b->T;
	int classes = c->task == TASK_MLM ? c->vocab : c->num_labels;
	for (int i = 0; i < nlabels; i++) {
		int y = b->labels[i];
		if ((y < 0 || y >= classes) && !(c->task != TASK_CLS && y == IGNORE_LABEL))
			die("bert: label %d out of range [0, %d)", y, classes);
	}
}

/* Sequence i's rows: its positions up to the last real token or predicted
 * position, or all T when no token is real (its attention is then uniform
 * over all T, as HF computes it). Padding inside those rows stays, masked. */
static int sequence_rows(const struct bert *m, const struct bert_batch *b, int i)
{
	const uint8_t *mask = b->mask ? b->mask + (size_t)i * b->T : NULL;
	int len = 0;
	for (int t = 0; t < b->T; t++)
		if (!mask || mask[t])
			len = t + 1;
	if (!len)
		return b->T;
	if (!bert_task_pooled(m->c.task))
		for (int t = len; t < b->T; t++)
			if (b->labels[(size_t)i * b->T + t] != IGNORE_LABEL)
				len = t + 1;
	return len;
}

/* Packs the batch's rows one sequence after another: kv_start, and the ids,
 * types, positions and mask of each row. */
static void pack_rows(struct bert *m, const struct bert_batch *b)
{
	grow(&m->kv_start, &m->kv_start_cap, b->B + 1, sizeof *m->kv_start);
	m->kv_start[0] = 0;
	m->T = 0;
	for (int i = 0; i < b->B; i++) {
		int len = sequence_rows(m, b, i);
		m->kv_start[i + 1] = m->kv_start[i] + len;
		m->T = len > m->T ? len : m->T;
	}
	m->holes = 0;
	size_t N = (size_t)m->kv_start[b->B];
	m->packed = (int)N;
	if (m->pad_rows && m->train && N < (size_t)m->pad_rows)
		N = (size_t)m->pad_rows;
	m->N = (int)N;
	grow(&m->ids, &m->ids_cap, N, sizeof *m->ids);
	grow(&m->types, &m->types_cap, N, sizeof *m->types);
	grow(&m->positions, &m->positions_cap, N, sizeof *m->positions);
	grow(&m->mask, &m->mask_cap, N, sizeof *m->mask);
	for (size_t r = (size_t)m->packed; r < N; r++)   /* padding, in no sequence */
		m->ids[r] = m->c.pad_id, m->types[r] = m->positions[r] = 0, m->mask[r] = 0;
	/* positions: each token's index (BERT's), or after the pad id the count
	 * so far of tokens that are not the pad id, and the pad id for those that
	 * are, wherever they stand (RoBERTa's, as transformers makes them from
	 * the ids alone) */
	int first = family_first_position(m->c.family, m->c.pad_id);
	for (int i = 0; i < b->B; i++)
		for (int t = 0, r = m->kv_start[i], real = 0; r < m->kv_start[i + 1]; t++, r++) {
			size_t at = (size_t)i * b->T + t;
			m->ids[r] = b->ids[at];
			m->types[r] = b->types && m->c.type_vocab ? b->types[at] : 0;
			m->mask[r] = b->mask ? b->mask[at] : 1;
			m->positions[r] = !first ? t : m->ids[r] != m->c.pad_id ? first + real++ : m->c.pad_id;
			m->holes |= r > m->kv_start[i] && m->mask[r] && !m->mask[r - 1];
		}
}

int bert_head_slots(int rows)
{
	return (size_class(rows) + 63) / 64 * 64;
}

/* Pads the head's rows towards bert_head_slots, one sequence after another
 * while any has fewer head rows than rows (a sequence's queries never
 * outnumber its keys): each added row is its sequence's last row again,
 * labelled to be ignored, so its query runs once more in the last layer
 * and its loss and gradient are zero (bert_set_head_slots). */
static void pad_head_rows(struct bert *m, int B)
{
	int want = bert_head_slots(m->M) - m->M, added = 0, room = 1;
	int *extra = xcalloc((size_t)B, sizeof *extra);
	while (added < want && room) {
		room = 0;
		for (int i = 0; i < B && added < want; i++)
			if (m->q_start[i + 1] - m->q_start[i] + extra[i] < m->kv_start[i + 1] - m->kv_start[i])
				extra[i]++, added++, room = 1;
	}
	/* in place, from the last sequence back: each row moves right or stays */
	int at = m->M + added, end = m->M;
	grow(&m->rows, &m->rows_cap, (size_t)at, sizeof *m->rows);
	grow(&m->labels, &m->labels_cap, (size_t)at, sizeof *m->labels);
	m->q_start[B] = m->M = at;
	for (int i = B - 1; i >= 0; i--) {
		for (int e = 0; e < extra[i]; e++)
			at--, m->rows[at] = m->kv_start[i + 1] - 1, m->labels[at] = IGNORE_LABEL;
		int start = m->q_start[i];
		for (int q = end - 1; q >= start; q--)
			at--, m->rows[at] = m->rows[q], m->labels[at] = m->labels[q];
		m->q_start[i] = at;
		end = start;
	}
	free(extra);
}

/* Lists the packed rows the head predicts, with their labels or targets:
 * the [CLS] row of each sequence, or the labelled positions in row-major
 * order; and q_start, where each sequence's run of them begins. */
static void list_head_rows(struct bert *m, const struct bert_batch *b)
{
	enum bert_task task = m->c.task;
	grow(&m->rows, &m->rows_cap, m->packed, sizeof *m->rows);
	grow(&m->labels, &m->labels_cap, m->packed, sizeof *m->labels);
	grow(&m->q_start, &m->q_start_cap, b->B + 1, sizeof *m->q_start);
	if (task == TASK_REG || task == TASK_MULTI) {
		size_t n = (size_t)b->B * (task == TASK_MULTI ? m->c.num_labels : 1);
		grow(&m->targets, &m->targets_cap, n, sizeof *m->targets);
		memcpy(m->targets, b->targets, n * sizeof *m->targets);
	}
	m->M = 0;
	for (int i = 0; i < b->B; i++) {
		m->q_start[i] = m->M;
		if (bert_task_pooled(task)) {
			m->rows[m->M] = m->kv_start[i];
			m->labels[m->M++] = task == TASK_CLS ? b->labels[i] : 0;
			continue;
		}
		for (int t = 0, r = m->kv_start[i]; r < m->kv_start[i + 1]; t++, r++) {
			int32_t y = b->labels[(size_t)i * b->T + t];
			if (y != IGNORE_LABEL) {
				m->rows[m->M] = r;
				m->labels[m->M++] = y;
			}
		}
	}
	m->q_start[b->B] = m->predicted = m->M;
	if (m->head_slots && m->train && m->M)
		pad_head_rows(m, b->B);
	m->empty = 0;
	for (int i = 0; i < b->B; i++)
		m->empty |= m->q_start[i + 1] == m->q_start[i];
}

/* Copies the batch, packed, so that backward never reads freed memory. */
static void keep_batch(struct bert *m, const struct bert_batch *b)
{
	m->B = b->B;
	pack_rows(m, b);
	list_head_rows(m, b);
	grow(&m->p_all, &m->p_all_cap, b->B + 1, sizeof *m->p_all);
	grow(&m->p_head, &m->p_head_cap, b->B + 1, sizeof *m->p_head);
	attention_probs(m->p_all, m->kv_start, NULL, b->B, m->c.heads);
	attention_probs(m->p_head, m->kv_start, m->q_start, b->B, m->c.heads);
	grow(&m->head_pos, &m->head_pos_cap, (size_t)m->M, sizeof *m->head_pos);
	for (int i = 0; i < m->M; i++)
		m->head_pos[i] = m->positions[m->rows[i]];
}

/* base's copy on the backend, in b; base itself on a host backend. */
static const void *to_backend(const struct backend *be, struct on_backend *b, const void *base,
			      size_t bytes)
{
	if (be->host)
		return base;
	void *p = bert_fit(be, b, bytes);
	be->upload(p, base, bytes);
	return p;
}

/* The kept batch where the ops read it. */
static void upload_batch(struct bert *m)
{
	const struct backend *be = m->be;
	size_t N = (size_t)m->N, M = (size_t)m->M, i32 = sizeof(int32_t);
	size_t seqs = (size_t)m->B + 1;
	m->d.ids = to_backend(be, &m->d_ids, m->ids, N * i32);
	m->d.types = to_backend(be, &m->d_types, m->types, N * i32);
	m->d.positions = to_backend(be, &m->d_positions, m->positions, N * i32);
	m->d.mask = to_backend(be, &m->d_mask, m->mask, N);
	m->d.rows = to_backend(be, &m->d_rows, m->rows, M * i32);
	m->d.labels = to_backend(be, &m->d_labels, m->labels, M * i32);
	m->d.kv_start = to_backend(be, &m->d_kv_start, m->kv_start, seqs * i32);
	m->d.q_start = to_backend(be, &m->d_q_start, m->q_start, seqs * i32);
	m->d.head_pos = to_backend(be, &m->d_head_pos, m->head_pos, M * i32);
	m->d.p_all = to_backend(be, &m->d_p_all, m->p_all, seqs * sizeof(int64_t));
	m->d.p_head = to_backend(be, &m->d_p_head, m->p_head, seqs * sizeof(int64_t));
	if (m->c.task == TASK_REG || m->c.task == TASK_MULTI)
		m->d.targets = to_backend(be, &m->d_targets, m->targets,
					  M * bert_logit_width(&m->c) * sizeof(float));
}

void bert_take_batch(struct bert *m, const struct bert_batch *b)
{
	check_batch(m, b);
	keep_batch(m, b);
	upload_batch(m);
}

struct bert_batch bert_twice(struct bert *m, const struct bert_batch *b)
{
	size_t cells = (size_t)b->B * b->T, nl = bert_task_pooled(m->c.task) ? (size_t)b->B : cells;
	struct bert_batch d = *b;
	d.B = 2 * b->B;
	grow(&m->twice_ids, &m->twice_ids_cap, 2 * cells, sizeof *m->twice_ids);
	grow(&m->twice_labels, &m->twice_labels_cap, 2 * nl, sizeof *m->twice_labels);
	for (int k = 0; k < 2; k++) {
		memcpy(m->twice_ids + k * cells, b->ids, cells * sizeof *b->ids);
		memcpy(m->twice_labels + k * nl, b->labels, nl * sizeof *b->labels);
		if (b->types) {
			grow(&m->twice_types, &m->twice_types_cap, 2 * cells, sizeof *m->twice_types);
			memcpy(m->twice_types + k * cells, b->types, cells * sizeof *b->types);
		}
		if (b->mask) {
			grow(&m->twice_mask, &m->twice_mask_cap, 2 * cells, sizeof *m->twice_mask);
			memcpy(m->twice_mask + k * cells, b->mask, cells);
		}
	}
	d.ids = m->twice_ids, d.labels = m->twice_labels;
	d.types = b->types ? m->twice_types : NULL;
	d.mask = b->mask ? m->twice_mask : NULL;
	return d;
}
