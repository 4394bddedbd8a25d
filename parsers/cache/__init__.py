"""A columnar cache of loaded traces, so a trace opens at once the second time.

``gapscope.parsers.load`` looks a file up here first and, after a fresh load of a
large enough file, writes its ``Trace`` here in a background thread; every surface
(viewer, report, diff, ranks, exercises) gets it through ``load``.

- ``settings``: where the cache lives and how big it may grow (environment variables).
- ``key``: which file an entry belongs to (device, inode, size, mtime, ctime, and a
  hash of the file's head and tail).
- ``layout``: the file format (a small msgpack header, then raw 64-byte-aligned
  arrays read with ``np.frombuffer`` over an ``mmap``).
- ``args``: how the lazy ``args_of`` of a cached trace still reads the original file.
- ``store``: lookup, the background write, least-recently-used eviction.
"""
