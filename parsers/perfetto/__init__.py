"""Perfetto TrackEvent protobuf traces (``.pftrace``, ``.perfetto-trace``, ``.pb``).

``gapscope.parsers.perfetto.loader.load_perfetto`` decodes the ``TracePacket`` stream
into Chrome trace events and hands them to the Chrome/Kineto loader, so a trace
written by PyTorch's or Kineto's Perfetto exporter loads into the same ``Trace`` as
its JSON twin. Needs the ``perfetto`` extra (``pip install 'gapscope[perfetto]'``).
"""
