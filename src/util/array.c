/*
 * Growable arrays (see array.h).
 */
#include "util/array.h"

#include <stdint.h>
#include <stdlib.h>

#include "csid.h"

int array_grow(void **arr, size_t *cap, size_t need, size_t size)
{
	size_t ncap;
	void *p;

	if (need <= *cap)
		return 0;
	if (size == 0)
		return CSID_EINVAL;
	ncap = *cap ? *cap : 4;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return CSID_ENOMEM;
		ncap *= 2;
	}
	if (ncap > SIZE_MAX / size)
		return CSID_ENOMEM;
	p = realloc(*arr, ncap * size);
	if (p == NULL)
		return CSID_ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}
