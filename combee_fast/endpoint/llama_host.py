"""llama.cpp's native HTTP server, hosted in a Python process by the ``xllamacpp`` wheel:
``python -m combee_fast.endpoint.llama_host --model FILE.gguf --port N --threads T --context C
--slots S [--alias NAME]`` (the defaults are :class:`~combee_fast.config.LocalConfig`'s, which
:mod:`.local` passes).

This is the ``--local`` server when no ``llama-server`` is on ``PATH`` (:mod:`.local`). The
wheel is prebuilt for any x86-64 CPU with AVX2 (no ``-march=native``: no AVX-512, no AMX), so
it decodes on every machine CI may land on, where a llama.cpp built from source for the machine
it was built on may not (a general protection fault in ``libggml-cpu`` on a Xeon with AMX). It is
the same C++ server as ``llama-server``: continuous batching over ``--slots`` parallel slots,
OpenAI-compatible ``/v1/chat/completions`` with JSON-schema outputs and tool calls (the model's
own chat template), a streamed request whose client goes away stops generating, and ``GET /metrics``
counts its work (:mod:`.server_work`).

``--context`` is the context of one slot; the server holds ``context * slots`` tokens in all.
It serves until SIGTERM or SIGINT, then exits 0 at once: the server holds nothing to save, and its
own shutdown waits for the decode in progress, which on a loaded machine takes minutes (a server
whose engine died must not outlive it by that). It leaves no core dump when it crashes.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import sys


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m combee_fast.endpoint.llama_host",
                                     description="llama.cpp's native server (xllamacpp) on loopback")
    parser.add_argument("--model", required=True, help="the GGUF file")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--context", type=int, required=True, help="context tokens of one slot")
    parser.add_argument("--slots", type=int, required=True, help="requests decoded at once (continuous batching)")
    parser.add_argument("--alias", default=None, help="the model name the server answers to")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash is reported by its signal, not a core file
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.hostnames = [args.host]
    params.port = args.port
    params.n_parallel = args.slots
    params.n_ctx = args.context * args.slots
    params.cont_batching = True
    params.endpoint_metrics = True
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    if args.alias:
        params.model_alias = {args.alias}
    stop = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)  # the server's threads inherit the mask: this thread waits
    server = xllamacpp.Server(params)
    print(f"llama_host: serving {args.model} on {server.listening_address} ({args.slots} slot(s), "
          f"{args.threads} thread(s)); {xllamacpp.get_system_info().strip()}", file=sys.stderr, flush=True)
    signal.sigwait(stop)
    sys.stderr.flush()
    os._exit(0)  # not the server's graceful stop: it waits for the decode in flight


if __name__ == "__main__":
    sys.exit(main())
