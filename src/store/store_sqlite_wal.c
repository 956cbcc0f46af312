/*
 * The SQLite store's WAL upkeep. With synchronous=NORMAL a checkpoint
 * first syncs the WAL file, then copies its pages into the database
 * file and syncs that, all under the connection's lock, on whichever
 * thread committed past the threshold (often the API's I/O thread). The
 * WAL sync was the longer part: 32 MiB of frames written since the last
 * one, 20 to 230 ms each on the development machine (perf trace of
 * bench_server), during which no request could touch the store.
 *
 * So SQLite's own checkpoint hook (wal_autocheckpoint) is replaced by
 * this one: after each commit it checkpoints past
 * STORE_SQLITE_WAL_CHECKPOINT frames as SQLite did, and each time the
 * WAL grew by STORE_SQLITE_WAL_SYNC frames it wakes a thread that syncs
 * the WAL file on its own descriptor, without the lock; the checkpoint's
 * sync then finds little left to write. Only syncs are added: what is
 * durable, and when, is as before.
 */
#include "store/store_sqlite_wal.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "csid.h"

struct store_sqlite_wal {
	const char *path;
	int synced; /* WAL frames when the thread was last woken (under the connection's lock) */
	int frames; /* WAL frames after the last commit (under the connection's lock) */
	_Atomic uint64_t pages; /* frames the commits wrote, in all */
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool due, stopping;
	pthread_t thread;
	int fd; /* the WAL file, opened by the thread when it first syncs */
};

static void *sw_main(void *arg)
{
	struct store_sqlite_wal *w = arg;

	pthread_mutex_lock(&w->mu);
	while (!w->stopping) {
		if (!w->due) {
			pthread_cond_wait(&w->cond, &w->mu);
			continue;
		}
		w->due = false;
		pthread_mutex_unlock(&w->mu);
		if (w->fd < 0)
			w->fd = open(w->path, O_RDONLY | O_CLOEXEC);
		/* A failure changes nothing: the checkpoint syncs as it always did. */
		if (w->fd >= 0)
			fdatasync(w->fd);
		pthread_mutex_lock(&w->mu);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* SQLite's WAL hook: after each commit, with the connection's lock held. */
static int sw_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
	struct store_sqlite_wal *w = arg;

	/* A WAL shorter than at the last commit started again from its beginning. */
	atomic_fetch_add(&w->pages, (uint64_t)(frames >= w->frames ? frames - w->frames : frames));
	w->frames = frames;
	if (frames >= STORE_SQLITE_WAL_CHECKPOINT) {
		/* What SQLite's own hook does; its outcome is no error of the commit. */
		sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
		w->synced = 0;
		return SQLITE_OK;
	}
	if (frames < w->synced) /* the WAL started again from its beginning */
		w->synced = 0;
	if (frames - w->synced >= STORE_SQLITE_WAL_SYNC) {
		w->synced = frames;
		pthread_mutex_lock(&w->mu);
		w->due = true;
		pthread_mutex_unlock(&w->mu);
		pthread_cond_signal(&w->cond);
	}
	return SQLITE_OK;
}

int store_sqlite_wal_start(sqlite3 *db, const char *wal_path, struct store_sqlite_wal **out)
{
	struct store_sqlite_wal *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (w == NULL)
		return CSID_ENOMEM;
	w->path = wal_path;
	w->fd = -1;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cond, NULL);
	if (pthread_create(&w->thread, NULL, sw_main, w) != 0) {
		pthread_cond_destroy(&w->cond);
		pthread_mutex_destroy(&w->mu);
		free(w);
		return CSID_ENOMEM;
	}
	pthread_setname_np(w->thread, "store-wal");
	sqlite3_wal_hook(db, sw_hook, w);
	*out = w;
	return 0;
}

uint64_t store_sqlite_wal_pages(struct store_sqlite_wal *w)
{
	return atomic_load(&w->pages);
}

void store_sqlite_wal_stop(struct store_sqlite_wal *w)
{
	if (w == NULL)
		return;
	pthread_mutex_lock(&w->mu);
	w->stopping = true;
	pthread_mutex_unlock(&w->mu);
	pthread_cond_signal(&w->cond);
	pthread_join(w->thread, NULL);
	if (w->fd >= 0)
		close(w->fd);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->mu);
	free(w);
}
