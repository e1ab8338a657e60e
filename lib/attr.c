/*
 * attr.c - reading sized structs from callers built against other headers.
 */
#include "lib/internal.h"

#include <string.h>

/*
 * Copy the caller's struct (whose first field, size, says how big it is)
 * into ours.  A smaller struct from an older header keeps our defaults in
 * the fields it lacks; a larger one from a newer header is accepted only if
 * the fields we do not know are zero, so a request for a feature this
 * library lacks is never silently dropped.  Returns 0 or SHEMB_EINVAL.
 */
int shemb__copy_sized(void *dst, size_t dst_size, const void *src,
		      size_t min_size)
{
	size_t src_size = *(const size_t *)src;
	const unsigned char *extra = (const unsigned char *)src + dst_size;

	if (src_size < min_size)
		return SHEMB_EINVAL;
	if (src_size > dst_size) {
		for (size_t i = 0; i < src_size - dst_size; i++)
			if (extra[i])
				return SHEMB_EINVAL;
		src_size = dst_size;
	}
	memcpy(dst, src, src_size);
	*(size_t *)dst = dst_size;
	return 0;
}

/*
 * Give the caller's struct of `size` bytes the defaults in `defaults`
 * (ours, of our_size bytes): what the caller's struct has beyond ours is
 * zeroed, and its size field keeps the caller's size.
 */
void shemb__init_sized(void *attr, size_t size, const void *defaults,
		       size_t our_size)
{
	if (!attr || size < sizeof(size_t))
		return;
	memset(attr, 0, size);
	memcpy(attr, defaults, size < our_size ? size : our_size);
	*(size_t *)attr = size;
}
