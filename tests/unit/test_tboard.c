/* TensorBoard framing: CRC-32C against its published check value, and the
 * mask TFRecord puts on it. (tests/cli/train_tensorboard.sh reads whole files
 * with TensorBoard's own reader.) */
#include "check.h"
#include "format/tboard.h"
#include <string.h>

int main(void)
{
	CHECK(tb_crc32c("123456789", 9) == 0xe3069283u, "CRC-32C of \"123456789\" is e3069283 (%08x)",
	      tb_crc32c("123456789", 9));
	CHECK(tb_crc32c("", 0) == 0, "CRC-32C of nothing is 0");
	unsigned char zeros[32] = {0};
	CHECK(tb_crc32c(zeros, 32) == 0x8a9136aau, "CRC-32C of 32 zero bytes is 8a9136aa (%08x)", tb_crc32c(zeros, 32));
	uint32_t c = tb_crc32c("123456789", 9);
	CHECK(tb_masked_crc("123456789", 9) == ((c >> 15) | (c << 17)) + 0xa282ead8u,
	      "the mask rotates right by 15 and adds a282ead8");
	CHECK_DONE();
}
