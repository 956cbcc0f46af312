/*
 * mkdir -p (mkdir_p.h): the whole path is tried first, then the deepest
 * existing parent is found and each missing component made downwards.
 */
#include "util/mkdir_p.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

static int mkdir_p_is_dir(const char *path, struct err *e)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return err_errno(e, errno, "stat %s", path);
	if (!S_ISDIR(st.st_mode))
		return err_set(e, CSID_EEXIST, "%s exists and is not a directory", path);
	return 0;
}

int mkdir_p(const char *dir, struct err *e)
{
	char path[4096];
	size_t n = strlen(dir);
	size_t i;

	if (n == 0 || n >= sizeof(path))
		return err_set(e, CSID_EINVAL, "directory path has a bad length (%zu)", n);
	memcpy(path, dir, n + 1);
	/*
	 * The whole path first: most calls find the parents there (or the
	 * directory itself, kept from an earlier mount), so it costs one or
	 * two system calls instead of one per component.
	 */
	if (mkdir(path, 0750) == 0)
		return 0;
	if (errno == EEXIST)
		return mkdir_p_is_dir(path, e);
	if (errno != ENOENT)
		return err_errno(e, errno, "mkdir %s", path);
	/* Walk back to the deepest existing parent, then create downwards. */
	for (i = n; i > 0;) {
		while (i > 0 && path[i] != '/')
			i--;
		if (i == 0)
			break;
		path[i] = '\0';
		if (mkdir(path, 0750) == 0 || errno == EEXIST) {
			path[i] = '/';
			break;
		}
		if (errno != ENOENT)
			return err_errno(e, errno, "mkdir %s", path);
	}
	/* path[0..i) exists (or i is 0); create each deeper component in turn. */
	for (i++; i <= n; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		path[i] = '\0';
		if (mkdir(path, 0750) != 0 && errno != EEXIST)
			return err_errno(e, errno, "mkdir %s", path);
		path[i] = (i == n) ? '\0' : '/';
	}
	return mkdir_p_is_dir(path, e);
}
