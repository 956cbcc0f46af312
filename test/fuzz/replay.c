/*
 * Runs a fuzz target without libFuzzer, as a regression test: every file of
 * the corpus directory given as argv[1], then a fixed number of inputs made
 * by mutating those files (and random bytes) with a fixed seed, so runs are
 * repeatable. Built into every test/fuzz/fuzz_*.c when CSID_FUZZ is off.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_MAX_INPUT (64 * 1024)
#define REPLAY_MUTATIONS 20000

static uint64_t replay_rng = 0x9e3779b97f4a7c15ull;

static uint32_t replay_rand(void)
{
	replay_rng ^= replay_rng << 13;
	replay_rng ^= replay_rng >> 7;
	replay_rng ^= replay_rng << 17;
	return (uint32_t)replay_rng;
}

struct replay_seed {
	uint8_t *data;
	size_t size;
};

static size_t replay_load(const char *dir, struct replay_seed *seeds, size_t max)
{
	DIR *d = opendir(dir);
	struct dirent *ent;
	size_t n = 0;

	if (!d)
		return 0;
	while ((ent = readdir(d)) && n < max) {
		char path[4096];
		FILE *f;

		if (ent->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, ent->d_name);
		f = fopen(path, "rb");
		if (!f)
			continue;
		seeds[n].data = malloc(REPLAY_MAX_INPUT);
		seeds[n].size = fread(seeds[n].data, 1, REPLAY_MAX_INPUT, f);
		fclose(f);
		LLVMFuzzerTestOneInput(seeds[n].data, seeds[n].size);
		n++;
	}
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	static struct replay_seed seeds[512];
	uint8_t *buf = malloc(REPLAY_MAX_INPUT);
	size_t nseeds = argc > 1 ? replay_load(argv[1], seeds, 512) : 0;

	for (int i = 0; i < REPLAY_MUTATIONS; i++) {
		size_t size;

		if (nseeds && i % 8 != 0) {
			struct replay_seed *s = &seeds[replay_rand() % nseeds];
			int flips = 1 + (int)(replay_rand() % 4);

			size = s->size;
			memcpy(buf, s->data, size);
			if (replay_rand() % 4 == 0 && size)
				size = replay_rand() % size; /* truncate */
			for (int k = 0; k < flips && size; k++)
				buf[replay_rand() % size] = (uint8_t)replay_rand();
		} else {
			size = replay_rand() % 256;
			for (size_t k = 0; k < size; k++)
				buf[k] = (uint8_t)replay_rand();
		}
		LLVMFuzzerTestOneInput(buf, size);
	}
	printf("replayed %zu corpus files and %d generated inputs\n", nseeds, REPLAY_MUTATIONS);
	for (size_t i = 0; i < nseeds; i++)
		free(seeds[i].data);
	free(buf);
	return 0;
}
