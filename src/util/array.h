/*
 * Growable arrays: the one helper that every module with a dynamic array
 * (registry entries, pending lists, subscriber lists) uses to make room,
 * with doubling growth and overflow checks.
 */
#ifndef CSID_UTIL_ARRAY_H
#define CSID_UTIL_ARRAY_H

#include <stddef.h>

/*
 * Makes *arr (an array of elements of size bytes, with room for *cap of
 * them) hold at least need elements, reallocating with doubling growth
 * (at least 4). On failure *arr and *cap are unchanged. Returns 0 or
 * CSID_ENOMEM (also when the size would overflow).
 */
int array_grow(void **arr, size_t *cap, size_t need, size_t size);

#endif
