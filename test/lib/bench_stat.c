/* Clock and median for the benchmarks (bench_stat.h). */
#include "bench_stat.h"

#include <stdlib.h>
#include <time.h>

double bench_stat_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int bench_stat_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

void bench_stat_sort(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_stat_cmp);
}

double bench_stat_median(double *v, int n)
{
	bench_stat_sort(v, n);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
