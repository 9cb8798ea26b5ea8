/* TensorBoard event files: a run's scalars as TensorBoard reads them, in
 * DIR/events.out.tfevents.TIME.HOST.PID: TFRecord framing (a length, the
 * data, each with its masked CRC-32C) around Event protocol buffers, each
 * with one Summary value. */
#ifndef TS_TBOARD_H
#define TS_TBOARD_H
#include <jansson.h>
#include <stdint.h>

struct tboard;

/* Makes dir if needed and a new event file in it (a resumed run adds one). */
struct tboard *tb_open(const char *dir);
/* Tells TensorBoard that the run goes on from step, as a resumed run
 * does from its checkpoint: the points of earlier files at step and after,
 * which the run makes again, are dropped (a SessionLog START). */
void tb_restart(struct tboard *tb, int64_t step);
/* One scalar at step and wall time (unix seconds). */
void tb_scalar(struct tboard *tb, const char *tag, int64_t step, double wall_time, double value);
/* Every number of an event's fields as scalar "PREFIX/KEY" (and
 * "PREFIX/KEY/SUB" one level down); the step from its "step" field. */
void tb_fields(struct tboard *tb, const char *prefix, const json_t *fields, double wall_time);
/* Flushes the scalars so far to the file; dies if it cannot. */
void tb_flush(struct tboard *tb);
void tb_close(struct tboard *tb);
/* CRC-32C (Castagnoli) of data, and TFRecord's mask of it. */
uint32_t tb_crc32c(const void *data, size_t n);
uint32_t tb_masked_crc(const void *data, size_t n);
#endif
