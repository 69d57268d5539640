/* SPDX-License-Identifier: MIT */
/* atomic_file.c - replacing a file so that a crash leaves the old one or the new one, whole
 * (clt_save, clt_save_npy; docs/reliability.md, "Crash-safe saves").
 *
 * The new contents go to a temporary file beside the target, "<path>.tmp-<pid>-<n>", created
 * with O_EXCL (never an existing file) and mode 0666 less the umask, or the permission bits of
 * the file it replaces. Commit is fsync, close, rename over the target (atomic within one file
 * system: any process sees the old file or the new one), then fsync of the directory so that the
 * rename itself survives a power loss. Every failure before the rename removes the temporary file
 * and leaves the target as it was. A save of several files (clt_save_sharded) closes each
 * (clt__afile_close: fsync, close) before it renames any.
 *
 * What is not covered: a process killed between creating the temporary file and renaming it
 * (SIGKILL, a power loss) leaves that temporary file behind, incomplete. clt never deletes a file
 * it did not just create in this call, so it does not clean such files up: they are named
 * "<path>.tmp-<pid>-<n>" for the user to remove. A symbolic link at path is replaced by the new
 * file, not followed. */
#define _POSIX_C_SOURCE 200809L
#include "clt-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

clt_status clt__afile_open(clt__afile *f, const char *path, const char *fn) {
  static atomic_uint counter;
  f->fd = -1;
  f->path = path;
  size_t size = strlen(path) + 64;
  if (!(f->tmp = malloc(size)))
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
    snprintf(f->tmp, size, "%s.tmp-%ld-%u", path, (long)getpid(), atomic_fetch_add(&counter, 1));
    fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  if (fd < 0) {
    int e = errno;
    free(f->tmp);
    f->tmp = NULL;
    return clt__error(CLT_ERR_IO, fn, "cannot create a temporary file beside %s: %s", path,
                      strerror(e));
  }
  /* Replacing a file keeps its permission bits (not set-id or sticky bits). Best effort: file
   * systems without Unix permissions refuse fchmod, and the default mode is then fine. */
  struct stat old;
  if (stat(path, &old) == 0 && S_ISREG(old.st_mode))
    (void)fchmod(fd, old.st_mode & 0777);
  f->fd = fd;
  return CLT_OK;
}

clt_status clt__afile_write(clt__afile *f, const void *data, size_t n, const char *fn) {
  const char *p = data;
  while (n > 0) {
    ssize_t w = write(f->fd, p, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return clt__error(CLT_ERR_IO, fn, "writing %s failed: %s (%s is left unchanged)", f->tmp,
                        w < 0 ? strerror(errno) : "no progress", f->path);
    p += w;
    n -= (size_t)w;
  }
  return CLT_OK;
}

void clt__afile_abort(clt__afile *f) {
  if (f->fd >= 0)
    close(f->fd);
  if (f->tmp)
    unlink(f->tmp);
  free(f->tmp);
  f->fd = -1;
  f->tmp = NULL;
}

/* The directory part of path ("." if none), malloc'ed. */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  size_t n = slash ? (size_t)(slash - path) : 0;
  char *d = malloc(n + 2);
  if (!d)
    return NULL;
  if (!slash)
    strcpy(d, ".");
  else if (n == 0)
    strcpy(d, "/");
  else {
    memcpy(d, path, n);
    d[n] = '\0';
  }
  return d;
}

clt_status clt__afile_close(clt__afile *f, const char *fn) {
  const char *what = NULL;
  int e = 0;
  if (fsync(f->fd) != 0)
    what = "syncing", e = errno;
  if (close(f->fd) != 0 && !what)
    what = "closing", e = errno;
  f->fd = -1;
  if (!what)
    return CLT_OK;
  clt_status s = clt__error(CLT_ERR_IO, fn, "%s %s failed: %s (%s is left unchanged)", what, f->tmp,
                            strerror(e), f->path);
  clt__afile_abort(f);
  return s;
}

clt_status clt__afile_rename(clt__afile *f, const char *fn) {
  clt_status s;
  if (f->fd >= 0 && (s = clt__afile_close(f, fn)) != CLT_OK)
    return s;
  if (rename(f->tmp, f->path) != 0) {
    s = clt__error(CLT_ERR_IO, fn, "renaming %s to %s failed: %s (%s is left unchanged)", f->tmp,
                   f->path, strerror(errno), f->path);
    clt__afile_abort(f);
    return s;
  }
  free(f->tmp);
  f->tmp = NULL;
  return CLT_OK;
}

clt_status clt__afile_sync_dir(const char *path, const char *fn) {
  /* The rename is in place; make it durable. A directory that cannot be opened for reading, or a
   * file system that cannot sync directories (EINVAL), leaves it to the system's own flush; an
   * I/O error is reported, since the new file might not survive a power loss. */
  char *dir = dir_of(path);
  if (!dir)
    return CLT_OK;
  clt_status s = CLT_OK;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    if (fsync(dfd) != 0 && errno != EINVAL && errno != ENOTSUP && errno != EROFS)
      s = clt__error(CLT_ERR_IO, fn,
                     "%s was written and renamed into place, but syncing its directory %s "
                     "failed: %s; after a power loss the previous file may reappear",
                     path, dir, strerror(errno));
    close(dfd);
  }
  free(dir);
  return s;
}

clt_status clt__afile_commit(clt__afile *f, const char *fn) {
  clt_status s = clt__afile_rename(f, fn);
  return s == CLT_OK ? clt__afile_sync_dir(f->path, fn) : s;
}
