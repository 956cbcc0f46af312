/*
 * The small statistics every benchmark under bench/ needs: a monotonic
 * clock in milliseconds and the median of a sample. Kept here so the
 * benchmarks (which link this test library) share one copy.
 */
#ifndef CSID_TEST_BENCH_STAT_H
#define CSID_TEST_BENCH_STAT_H

/* CLOCK_MONOTONIC in milliseconds. */
double bench_stat_now_ms(void);
/* Sorts v[0..n) ascending. */
void bench_stat_sort(double *v, int n);
/* Sorts v[0..n) (n > 0) and returns its median (the mean of the middle two when n is even). */
double bench_stat_median(double *v, int n);

#endif
