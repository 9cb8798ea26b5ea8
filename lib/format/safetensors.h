/* safetensors files (Hugging Face's tensor format): an 8-byte little-endian
 * header length, a JSON header naming each tensor's dtype, shape and byte
 * range, then the raw data. Read by mmap; written as fp32. */
#ifndef TS_SAFETENSORS_H
#define TS_SAFETENSORS_H
#include "format/tensor.h"
#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS 8

enum st_dtype {
	ST_BOOL, ST_U8, ST_I8, ST_F8_E5M2, ST_F8_E4M3, ST_I16, ST_U16, ST_F16, ST_BF16,
	ST_I32, ST_U32, ST_F32, ST_I64, ST_U64, ST_F64
};

struct st_tensor {
	const char *name;
	const char *file;               /* the path of its file, for errors */
	int dtype;                      /* enum st_dtype */
	int ndim;                       /* 0 for a scalar */
	int64_t shape[ST_MAX_DIMS];
	const void *data;               /* inside the mapping: may be unaligned */
	size_t nbytes;
	struct st_file *of;             /* its file */
};

struct st_file;

/* Maps and validates path (or takes its bytes where a digests' check kept
 * them: format/dirdigest.h); dies "PATH: not a regular file" on a directory,
 * FIFO or device, and "PATH: corrupt safetensors header: why" on a short
 * file, a header length beyond the file, a header that is not a JSON object,
 * an unknown dtype, or byte ranges out of range, overlapping or not matching
 * shape*dtype.
 * Where the check kept the file with only its head checked, st_to_f32
 * checks the rest as it copies it (the bytes between one tensor and the
 * next it is given are hashed then; a tensor before those is copied
 * unhashed, as its bytes were hashed in passing), and st_checked or
 * st_close ends the check. A header longer than the head is checked whole
 * here, and refused where it differs. */
struct st_file *st_open(const char *path);
/* Whether the file had the digest its check wants, the bytes not yet read
 * now read (1 where nothing was left to check); recorded for
 * dirdigest_confirm. */
int st_checked(struct st_file *f);
void st_close(struct st_file *f);
int st_count(const struct st_file *f);
/* The i-th tensor in header order. */
const struct st_tensor *st_get(const struct st_file *f, int i);
/* The tensor called name, or NULL. */
const struct st_tensor *st_find(const struct st_file *f, const char *name);
const char *st_dtype_name(int dtype);
/* Converts an F32, F16, BF16 or F64 tensor to fp32 (numel floats into dst);
 * dies naming the tensor for any other dtype. */
void st_to_f32(const struct st_tensor *t, float *dst);

/* Writes the n tensors as F32 in the given order, atomically, with
 * "__metadata__": {"format": "pt"} (transformers requires it) and the header
 * padded to a multiple of 8 bytes so the data is aligned. */
void st_write(const char *path, const struct tensor_ref *t, int n);
#endif
