/* One thread's JSON values from an arena: jansson allocates a value, a
 * string and a table slot at a time, which for a tokenizer.json of 250,000
 * vocab entries is most of its reading. Between json_arena_begin and
 * json_arena_end, what jansson allocates on the calling thread comes from
 * large blocks and is freed with them, all at once; other threads' values
 * still go through malloc and free. */
#ifndef TS_JSONARENA_H
#define TS_JSONARENA_H

void json_arena_begin(void);
/* Frees every value made on this thread since json_arena_begin, without
 * json_decref: none of them may be used after. */
void json_arena_end(void);

/* This thread's arena, ended here without freeing it, for another thread
 * to take in (json_arena_adopt): values read on a helper thread live on
 * in the reading thread's arena. */
struct json_blocks *json_arena_detach(void);
/* Makes blocks (from json_arena_detach) part of this thread's open arena,
 * freed with it. */
void json_arena_adopt(struct json_blocks *blocks);
#endif
