"""The files the recorder writes: a trace's body spooled while the event
tree is walked (its header, which states what the walk learnt, goes first),
and output files that appear whole or not at all, with nothing else left
behind (an unnamed O_TMPFILE file linked into place; a named temporary file
where the file system has none). docs/reliability.md states the guarantees.
"""

import errno
import gzip
import os
import shutil
import tempfile
import zlib

# gzip compression level of .gz traces. Level 2 compresses a one-step trace
# 2.5x faster than level 6 (about 4 ms instead of 12 for 1.4 MB: 0.25x the
# tree build instead of 0.7x, issue #4's budget being 2x) for files about 29%
# larger; level 1 is no faster and 6% larger still.
GZIP_LEVEL = 2

# Bytes per read when the body is copied after the header.
_COPY_CHUNK = 1 << 16


class _SpooledTrace:
    """write_events' sink for a text stream: the body goes to an anonymous
    temporary file while the tree is walked; finish() writes the header to
    the stream, then copies the body after it."""

    def __init__(self, out):
        self.out = out
        self.body = tempfile.TemporaryFile("w+", encoding="utf-8", newline="")
        self.write = self.body.write

    def reset(self):
        self.body.seek(0)
        self.body.truncate()

    def write_bytes(self, data):
        self.write(data.decode("utf-8"))

    def finish(self, header):
        self.out.write(header)
        self.body.seek(0)
        shutil.copyfileobj(self.body, self.out, _COPY_CHUNK)

    def close(self):
        self.body.close()


class _TraceFile:
    """save's sink: the body goes, UTF-8 encoded and (for .gz) compressed as
    a gzip member of its own, to an anonymous temporary file in the output's
    directory while the tree is walked; finish() writes the header to `raw`
    (for .gz: a gzip member holding the header line, its gzip header naming
    the final file), then copies the body's bytes after it as they are. A
    gzip file may hold several members (RFC 1952): reading it gives the
    header line, then the body. Nothing holds the whole trace in memory."""

    def __init__(self, raw, directory, gzip_name=None):
        self.raw = raw
        self.gzip_name = gzip_name  # None: plain text
        self.body = tempfile.TemporaryFile(dir=directory)
        self.deflate = None
        self.reset()

    def reset(self):
        self.body.seek(0)
        self.body.truncate()
        if self.gzip_name is not None:
            # wbits 16 + 15: a gzip member (header, deflate data, CRC-32 and length).
            self.deflate = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)

    def write(self, s):
        self.write_bytes(s.encode("utf-8"))

    def write_bytes(self, data):
        if self.deflate is not None:
            data = self.deflate.compress(data)
        self.body.write(data)

    def finish(self, header):
        raw = self.raw
        if self.deflate is not None:
            self.body.write(self.deflate.flush())
            with gzip.GzipFile(filename=self.gzip_name, mode="wb", compresslevel=GZIP_LEVEL, fileobj=raw,
                               mtime=0) as gz:
                gz.write(header.encode("utf-8"))
        else:
            raw.write(header.encode("utf-8"))
        self.body.seek(0)
        shutil.copyfileobj(self.body, raw, _COPY_CHUNK)

    def close(self):
        self.body.close()


def _open_unnamed_or_temporary(directory, base):
    """(descriptor, None) for an unnamed file in `directory` (Linux
    O_TMPFILE: nothing is left if the process dies, SIGKILL included), or
    (descriptor, name) of a named temporary file where the file system has
    no O_TMPFILE."""
    flag = getattr(os, "O_TMPFILE", 0)
    if flag:
        try:
            return os.open(directory, flag | os.O_WRONLY | os.O_CLOEXEC, 0o644), None
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.EACCES, errno.ENOTDIR, errno.EROFS):
                raise
    fd, tmp = _named_temporary(directory, base)
    os.fchmod(fd, 0o644)  # mkstemp creates 0600
    return fd, tmp


def _named_temporary(directory, base):
    """A new file `.BASE.XXXXXXXX.tmp` in `directory` (BASE cut so that the
    name stays within the file systems' 255 bytes): (descriptor, path)."""
    return tempfile.mkstemp(prefix="." + base[:200] + ".", suffix=".tmp", dir=directory)


def _put_in_place(fd, tmp, target, directory, base):
    """Gives the written file its name atomically and syncs the directory."""
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if tmp is None:
            # linkat(AT_SYMLINK_FOLLOW) of the descriptor's /proc name: os.link
            # calls linkat only when given a directory descriptor.
            proc = "/proc/self/fd/%d" % fd
            try:
                os.link(proc, os.path.basename(target), dst_dir_fd=dfd, follow_symlinks=True)
            except FileExistsError:
                # Replace the existing file: link under a free temporary name,
                # then rename over it.
                probe, tmp = _named_temporary(directory, base)
                os.close(probe)
                os.unlink(tmp)
                try:
                    os.link(proc, os.path.basename(tmp), dst_dir_fd=dfd, follow_symlinks=True)
                    os.replace(tmp, target)
                except BaseException:
                    try:
                        os.unlink(tmp)
                    except OSError:
                        pass
                    raise
        else:
            os.replace(tmp, target)
        os.fsync(dfd)
    finally:
        os.close(dfd)
