#include "util/decimal.h"

#include <string.h>

size_t decimal_text(char buf[DECIMAL_MAX], long long v)
{
	/* Digits from the end; the magnitude as unsigned, so LLONG_MIN fits. */
	unsigned long long m = v < 0 ? 0 - (unsigned long long)v : (unsigned long long)v;
	char tmp[DECIMAL_MAX];
	size_t at = sizeof(tmp) - 1, len;

	tmp[at] = '\0';
	do {
		tmp[--at] = (char)('0' + m % 10);
		m /= 10;
	} while (m);
	if (v < 0)
		tmp[--at] = '-';
	len = sizeof(tmp) - 1 - at;
	memcpy(buf, tmp + at, len + 1);
	return len;
}
